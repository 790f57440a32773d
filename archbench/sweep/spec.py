"""Study specs: load a `runs/<study>.yaml`, check every part of it, and hold it as a StudySpec.

Every problem raises UsageError with one line naming the key and what it accepts, before anything
starts. The format is documented in runs/README.md.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archbench.cluster import dilation as dilation_of
from archbench.cluster.idlewait import MAX_NAP_US
from archbench.common.errors import UsageError
from archbench.common.safe_text import one_line
from archbench.runtime import virtualtime
from archbench.runtime.settings import LevelError, setting
from archbench.sweep import allowed, limits
from archbench.sweep.preflight import interpreter_problem

DESIGN_KINDS = ("full_factorial", "random", "latin_hypercube", "one_at_a_time")
CLUSTER_KINDS = ("auto", "localhost", "emulated", "slurm", "hostfile")
# random: seeded shuffle; blocked: each repetition in turn (shuffled inside), so a configuration's
# repetitions are spread over the study's time and warm launches form inside a repetition;
# design: the design's own order.
ORDERS = ("random", "blocked", "design")
# How a study's `single` baseline runs beside a `workers` factor: alone on one host, or loaded
# (with workers - 1 companions training at the same time on other hosts, as a W-worker job
# loads the machine); auto: loaded on the emulated cluster, whose nodes share one machine.
BASELINE_LOADS = ("alone", "loaded")
# The whole name (fullmatch): it names the results folder and the Slurm job.
_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_TOP_KEYS = {
    "study",
    "description",
    "seed",
    "repetitions",
    "seed_per_repetition",
    "order",
    "baseline_load",
    "timeout_s",
    "timeouts",
    "launch_retries",
    "launcher_args",
    "python",
    "env",
    "cluster",
    "fixed",
    "factors",
    "design",
    "exclude",
    "timeline",
    "warm",
    "report_every_s",
    "also",
}
# The keys of one `also:` block.
_BLOCK_KEYS = {"fixed", "factors", "repetitions", "timeline"}
_CLUSTER_KEYS = {
    "kind", "slots", "nodes", "bandwidth", "manage", "name", "prefix", "dilation",
    "vcpus_per_node", "vcpus_per_process", "idle_nap_us", "hostfile",
}  # fmt: skip


@dataclass(frozen=True)
class NumericRange:
    """A continuous factor for random and latin_hypercube designs: low..high, optionally log-scaled."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    def at(self, fraction: float) -> float | int:
        """The value at `fraction` (0..1) of the range."""
        if self.log:
            value = math.exp(
                math.log(self.low) + fraction * (math.log(self.high) - math.log(self.low))
            )
        else:
            value = self.low + fraction * (self.high - self.low)
        if self.integer:
            return int(min(self.high, max(self.low, math.floor(value + 0.5))))
        return float(f"{value:.6g}")  # stable text, hence a stable run id


Levels = list[Any] | NumericRange


@dataclass(frozen=True)
class Design:
    kind: str
    n: int = 0
    base: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSpec:
    kind: str = "auto"
    slots: int | None = None  # per host; localhost default: the cores of this machine
    nodes: int = 2  # emulated cluster size
    bandwidth: str | None = None  # emulated link rate when not a factor
    manage: bool = True  # emulated: bring it up when down, and down again at the end
    name: str = "emulated"  # emulated: the cluster's name (archbench cluster up --name)
    prefix: str = "node"  # emulated: node names are <prefix>1..<prefix>N
    # emulated: the time dilation when the sweep brings the cluster up (None: auto; "off": no
    # caps) and the virtual cores per node (None: no total)
    dilation: float | str | None = None
    vcpus_per_node: int | None = None
    vcpus_per_process: int | None = None
    # emulated: how long an idle wait on a node sleeps instead of spinning (None: the default)
    idle_nap_us: int | None = None
    # hostfile: the Open MPI hostfile of the user's own hosts (`host slots=N` lines), relative
    # to the folder the sweep runs in; `bandwidth` is then the rate its links are said to have
    hostfile: str | None = None


@dataclass(frozen=True)
class Block:
    """An `also:` block: configurations added to the study's design, the full factorial of the
    block's own factors over the study's fixed settings and the block's (which win). A block does
    not cross the study's factors: it names every setting it varies."""

    fixed: dict[str, Any]
    factors: dict[str, list[Any]]
    repetitions: int
    timeline: bool  # a trace per run of this block (the study's `timeline:` unless it says)


@dataclass(frozen=True)
class TimeoutRule:
    when: dict[str, Any]
    timeout_s: float


@dataclass
class StudySpec:
    name: str
    path: Path
    results_dir: Path
    description: str = ""
    seed: int = 1
    repetitions: int = 1
    seed_per_repetition: bool = True
    order: str = "random"
    # `loaded`: `single` of a W-worker design point runs with W - 1 companions computing beside it
    # on nodes of their own (`runs/companions.yaml` measured them moving nothing past the noise)
    baseline_load: str = "alone"
    timeout_s: float = 600.0
    timeouts: list[TimeoutRule] = field(default_factory=list)
    launch_retries: int = 2  # tries again of a run whose launcher could not start (no rank ran)
    launcher_args: list[str] = field(default_factory=list)
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    fixed: dict[str, Any] = field(default_factory=dict)
    factors: dict[str, Levels] = field(default_factory=dict)
    design: Design = field(default_factory=lambda: Design("full_factorial"))
    exclude: list[dict[str, Any]] = field(default_factory=list)
    timeline: bool = False  # a --timeline trace per run, beside its record
    warm: bool = True  # runs that share a process layout share a launch (warm groups)
    # the sweep refreshes the study's report between launches at least this often (blocked order:
    # after each repetition block); 0: only `archbench report` writes it
    report_every_s: int = 180
    also: list[Block] = field(default_factory=list)  # configurations added to the design

    def timeout_for(self, config: dict[str, Any]) -> float:
        """The first matching rule's timeout, else the study's."""
        for rule in self.timeouts:
            if all(config.get(key) == value for key, value in rule.when.items()):
                return rule.timeout_s
        return self.timeout_s


def load_spec(
    path: str | os.PathLike[str], results_root: str | os.PathLike[str] | None = None
) -> StudySpec:
    """Reads and validates a study spec. Results go to `<results_root>/<study>/` (default: beside it)."""
    import yaml

    spec_path = Path(path)
    if not spec_path.is_file():
        raise UsageError(f"{path}: no such study spec")
    try:
        if spec_path.stat().st_size > limits.MAX_SPEC_BYTES:
            raise UsageError(
                f"{path}: a study spec is at most {limits.MAX_SPEC_BYTES:,} bytes; this is not one"
            )
        raw = yaml.load(spec_path.read_text(), Loader=_unique_keys_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}:{where} not valid YAML ({problem})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read ({exc})") from None
    return parse_spec(raw, spec_path, results_root)


def _unique_keys_loader() -> type:
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML
    keeps the last one silently, so `fixed:` written twice would lose the first)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str | int | float | bool):
                    continue  # not hashable: PyYAML's own check refuses it
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice; keep one", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def parse_spec(
    raw: Any, spec_path: Path, results_root: str | os.PathLike[str] | None = None
) -> StudySpec:
    """Validates the parsed YAML document of a study spec."""
    where = str(spec_path)
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: a study spec is a mapping (study:, factors:, design: ...)")
    unknown = sorted(set(map(str, raw)) - _TOP_KEYS)
    if unknown:
        raise UsageError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})"
        )

    name = str(raw.get("study") or spec_path.stem)
    if not _STUDY_NAME.fullmatch(name):
        raise UsageError(
            f"{where}: study name {name!r} must be 1-100 letters, digits, '_', '-' or '.' "
            "(starting with a letter or digit)"
        )
    root = Path(results_root) if results_root is not None else spec_path.parent
    spec = StudySpec(name=name, path=spec_path, results_dir=root / name)
    spec.description = str(raw.get("description") or "")
    spec.seed = _int(raw, "seed", 1, where, minimum=0, maximum=setting("seed").maximum)
    spec.repetitions = _int(raw, "repetitions", 1, where, 1, limits.MAX_REPETITIONS)
    spec.seed_per_repetition = _bool(raw, "seed_per_repetition", True, where)
    spec.order = _choice(raw, "order", "random", ORDERS, where)
    spec.baseline_load = _choice(raw, "baseline_load", "alone", BASELINE_LOADS, where)
    spec.timeout_s = _positive_number(raw.get("timeout_s", 600), "timeout_s", where)
    spec.timeouts = _timeouts(raw.get("timeouts"), where)
    spec.launch_retries = _int(raw, "launch_retries", 2, where, 0, limits.MAX_LAUNCH_RETRIES)
    spec.launcher_args = allowed.check_launcher_args(
        _words(raw.get("launcher_args", []), "launcher_args", where), where
    )
    spec.python = _python(raw.get("python"), where)
    spec.env = _env(raw.get("env"), where)
    spec.cluster = _cluster(raw.get("cluster"), where)
    spec.fixed = _fixed(raw.get("fixed"), where)
    spec.factors = _factors(raw.get("factors"), where)
    overlap = sorted(set(spec.fixed) & set(spec.factors))
    if overlap:
        raise UsageError(f"{where}: {overlap[0]!r} is both fixed and a factor; keep one")
    spec.design = _design(raw.get("design", "full_factorial"), spec.factors, where)
    spec.exclude = _exclude(raw.get("exclude"), spec, where)
    spec.timeline = _bool(raw, "timeline", False, where)
    spec.warm = _bool(raw, "warm", True, where)
    spec.report_every_s = _int(raw, "report_every_s", 180, where, 0, 7 * 24 * 3600)
    spec.also = _also(raw.get("also"), spec, where)
    for rule in spec.timeouts:
        _check_known_values(rule.when, spec, f"{where}: timeouts")
    if "epochs" in spec.fixed and "steps" in spec.fixed:
        raise UsageError(f"{where}: fixed sets both epochs and steps; a run trains for one of them")
    return spec


# --------------------------------------------------------------------------- pieces


def _int(raw: dict, key: str, default: int, where: str, minimum: int, maximum: float) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise UsageError(
            f"{where}: {key} must be an integer in {minimum:,}..{int(maximum):,}, got {value!r}"
        )
    return value


def _python(value: Any, where: str) -> str | None:
    """The interpreter of the runs: a Python (checked here without running it; that it imports
    archbench is checked before the first run)."""
    if value is None or value == "":
        return None

    if not isinstance(value, str):
        raise UsageError(f"{where}: python must be the path of a Python interpreter, got {value!r}")
    one_line(value, f"{where}: python:")
    problem = interpreter_problem(value, from_spec=True)
    if problem:
        raise UsageError(
            f"{where}: python: {value} {problem}; set python: to a Python with archbench"
        )
    return value


def _bool(raw: dict, key: str, default: bool, where: str) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise UsageError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def _choice(raw: dict, key: str, default: str, choices: tuple[str, ...], where: str) -> str:
    value = raw.get(key, default)
    if value not in choices:
        raise UsageError(f"{where}: {key} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _positive_number(value: Any, key: str, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < math.inf  # NaN fails both comparisons
    ):
        raise UsageError(f"{where}: {key} must be a positive number of seconds, got {value!r}")
    return float(value)


def _words(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise UsageError(f"{where}: {key} must be a list of command-line words, got {value!r}")
    return [str(v) for v in value]


def _env(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: env must map variable names to values, got {value!r}")
    env = {}
    for key, text in value.items():
        allowed.check_variable(str(key), f"{where}: env")
        if isinstance(text, dict | list) or text is None:
            raise UsageError(f"{where}: env: {key} must be a single value, got {text!r}")
        env[str(key)] = str(text).lower() if isinstance(text, bool) else str(text)
    return env


def _cluster(value: Any, where: str) -> ClusterSpec:
    if value is None:
        return ClusterSpec()
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: cluster must be a mapping (kind:, slots:, nodes:, bandwidth:)")
    unknown = sorted(set(map(str, value)) - _CLUSTER_KEYS)
    if unknown:
        raise UsageError(
            f"{where}: cluster: unknown key {unknown[0]!r} (known: {', '.join(sorted(_CLUSTER_KEYS))})"
        )
    kind = _choice(value, "kind", "auto", CLUSTER_KINDS, f"{where}: cluster")
    # deferred: the cluster spec loads only for a study that names a cluster
    from archbench.cluster.spec import MAX_NODES, NAME_PATTERN, PREFIX_PATTERN

    slots = value.get("slots")
    if slots is not None:
        slots = _int(value, "slots", 1, f"{where}: cluster", 1, limits.MAX_SLOTS)
    nodes = _int(value, "nodes", 2, f"{where}: cluster", 1, MAX_NODES)
    bandwidth = value.get("bandwidth")
    if bandwidth is not None:
        try:
            bandwidth = setting("bandwidth").coerce(bandwidth)
        except LevelError as exc:
            raise UsageError(f"{where}: cluster: bandwidth {exc}") from None
    manage = _bool(value, "manage", True, f"{where}: cluster")
    name = str(value.get("name", "emulated"))
    prefix = str(value.get("prefix", "node"))
    if not NAME_PATTERN.fullmatch(name) or not PREFIX_PATTERN.fullmatch(prefix):
        raise UsageError(
            f"{where}: cluster: name must be 1-40 letters, digits, '.', '_', '-' and prefix 1-10 lower-case letters"
        )
    if "cpus_per_node" in value:
        raise UsageError(
            f"{where}: cluster: cpus_per_node is gone: nodes are capped by time dilation "
            "(dilation: auto | a factor | off, vcpus_per_node: V)"
        )
    dilation = value.get("dilation")
    vcpus = value.get("vcpus_per_node")
    per_process = value.get("vcpus_per_process")
    for key, count in (("vcpus_per_node", vcpus), ("vcpus_per_process", per_process)):
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise UsageError(f"{where}: cluster: {key} {count!r} must be a whole number")
    if dilation is not None or vcpus is not None or per_process is not None:
        try:  # a factor >= 1, auto or off, that fits this machine
            dilation_of.parse(dilation, nodes, vcpus, virtualtime.usable_cores(), None, per_process)
        except UsageError as exc:
            raise UsageError(f"{where}: cluster: {exc}") from None
    nap_us = value.get("idle_nap_us")
    if nap_us is not None:
        if isinstance(nap_us, bool) or not isinstance(nap_us, int) or not 0 <= nap_us <= MAX_NAP_US:
            raise UsageError(
                f"{where}: cluster: idle_nap_us {nap_us!r} must be a whole number of "
                f"microseconds in 0..{MAX_NAP_US} (0: waits spin)"
            )
    hostfile = value.get("hostfile")
    if (kind == "hostfile") != (hostfile is not None):
        raise UsageError(
            f"{where}: cluster: kind hostfile and hostfile: FILE go together "
            "(kind: hostfile, hostfile: hosts.txt)"
        )
    if hostfile is not None and (not isinstance(hostfile, str) or not hostfile.strip()):
        raise UsageError(f"{where}: cluster: hostfile must be a path, got {hostfile!r}")
    return ClusterSpec(
        kind=kind,
        hostfile=hostfile,
        slots=slots,
        nodes=nodes,
        bandwidth=bandwidth,
        manage=manage,
        name=name,
        prefix=prefix,
        dilation=dilation,
        vcpus_per_node=vcpus,
        vcpus_per_process=per_process,
        idle_nap_us=nap_us,
    )


def _coerce(name: str, value: Any, where: str) -> Any:
    try:
        return setting(name).coerce(value)
    except LevelError as exc:
        raise UsageError(f"{where}: {name}: {exc}") from None


def _known_setting(name: Any, where: str) -> str:
    try:
        setting(str(name))
    except LevelError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return str(name)


def _fixed(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: fixed must map settings to values, got {value!r}")
    return {
        _known_setting(name, f"{where}: fixed"): _coerce(str(name), level, f"{where}: fixed")
        for name, level in value.items()
    }


def _factors(value: Any, where: str) -> dict[str, Levels]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: factors must map settings to lists of levels, got {value!r}")
    factors: dict[str, Levels] = {}
    for raw_name, levels in value.items():
        name = _known_setting(raw_name, f"{where}: factors")
        context = f"{where}: factors: {name}"
        if isinstance(levels, dict):
            factors[name] = _numeric_range(name, levels, context)
            continue
        if not isinstance(levels, list) or not levels:
            raise UsageError(
                f"{context}: give a non-empty list of levels (or min:/max: for a numeric range)"
            )
        if len(levels) > limits.MAX_LEVELS:
            raise UsageError(
                f"{context}: {len(levels):,} levels; a factor has at most {limits.MAX_LEVELS:,}"
            )
        coerced = [_coerce(name, level, f"{where}: factors") for level in levels]
        seen: list[Any] = []
        for level in coerced:
            if level in seen:
                raise UsageError(f"{context}: level {level!r} is listed twice")
            seen.append(level)
        factors[name] = coerced
    return factors


def _numeric_range(name: str, levels: dict, context: str) -> NumericRange:
    if not setting(name).numeric:
        raise UsageError(
            f"{context}: a min/max range needs a numeric setting; give a list of levels"
        )
    unknown = sorted(set(map(str, levels)) - {"min", "max", "log"})
    if unknown or "min" not in levels or "max" not in levels:
        raise UsageError(f"{context}: a range is {{min: A, max: B}} with optional log: true")
    low = _coerce(name, levels["min"], context)
    high = _coerce(name, levels["max"], context)
    if not low < high:
        raise UsageError(f"{context}: min ({low}) must be below max ({high})")
    log = levels.get("log", False)
    if not isinstance(log, bool) or (log and low <= 0):
        raise UsageError(f"{context}: log must be true or false, and a log range needs min > 0")
    return NumericRange(float(low), float(high), log=log, integer=setting(name).kind == "int")


def _design(value: Any, factors: dict[str, Levels], where: str) -> Design:
    if isinstance(value, str):
        kind, options = value, {}
    elif isinstance(value, dict) and len(value) == 1:
        kind, options = next(iter(value.items()))
        options = options or {}
    else:
        raise UsageError(
            f"{where}: design must be one of {', '.join(DESIGN_KINDS)} (or e.g. random: {{n: 10}})"
        )
    if kind not in DESIGN_KINDS:
        raise UsageError(f"{where}: design {kind!r} is not one of {', '.join(DESIGN_KINDS)}")
    if not isinstance(options, dict):
        raise UsageError(f"{where}: design {kind}: options must be a mapping, got {options!r}")
    context = f"{where}: design {kind}"
    ranges = [name for name, levels in factors.items() if isinstance(levels, NumericRange)]
    if kind in ("full_factorial", "one_at_a_time") and ranges:
        raise UsageError(
            f"{context}: factor {ranges[0]!r} is a range; list its levels or use random/latin_hypercube"
        )
    if kind in ("random", "latin_hypercube"):
        unknown = sorted(set(map(str, options)) - {"n"})
        if unknown:
            raise UsageError(f"{context}: unknown option {unknown[0]!r} (known: n)")
        n = options.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= limits.MAX_DESIGN_POINTS:
            raise UsageError(
                f"{context}: n must be an integer in 1..{limits.MAX_DESIGN_POINTS:,}, got {n!r}"
            )
        if kind == "latin_hypercube" and not any(
            isinstance(levels, NumericRange) or setting(name).numeric
            for name, levels in factors.items()
        ):
            raise UsageError(
                f"{context}: needs at least one numeric factor (e.g. lr, batch_size, workers)"
            )
        return Design(kind, n=n)
    if kind == "one_at_a_time":
        unknown = sorted(set(map(str, options)) - {"base"})
        if unknown:
            raise UsageError(f"{context}: unknown option {unknown[0]!r} (known: base)")
        base = options.get("base") or {}
        if not isinstance(base, dict):
            raise UsageError(f"{context}: base must map factors to one of their levels")
        resolved = {}
        for name, level in base.items():
            if name not in factors:
                raise UsageError(f"{context}: base names {name!r}, which is not a factor")
            level = _coerce(str(name), level, context)
            if level not in factors[name]:
                raise UsageError(
                    f"{context}: base level {level!r} of {name!r} is not among its levels"
                )
            resolved[str(name)] = level
        for name, levels in factors.items():
            resolved.setdefault(name, levels[0])  # type: ignore[index]
        return Design(kind, base=resolved)
    if options:
        raise UsageError(f"{context}: takes no options")
    return Design(kind)


def _timeouts(value: Any, where: str) -> list[TimeoutRule]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > limits.MAX_RULES:
        raise UsageError(
            f"{where}: timeouts must be a list of at most {limits.MAX_RULES:,} "
            "{when: {...}, timeout_s: N} rules"
        )
    rules = []
    for item in value:
        if (
            not isinstance(item, dict)
            or set(item) != {"when", "timeout_s"}
            or not isinstance(item["when"], dict)
        ):
            raise UsageError(
                f"{where}: timeouts: each rule is {{when: {{setting: level}}, timeout_s: N}}, got {item!r}"
            )
        when = {
            _known_setting(k, f"{where}: timeouts"): _coerce(str(k), v, f"{where}: timeouts")
            for k, v in item["when"].items()
        }
        rules.append(
            TimeoutRule(when, _positive_number(item["timeout_s"], "timeouts: timeout_s", where))
        )
    return rules


def _also(value: Any, spec: StudySpec, where: str) -> list[Block]:
    """`also:`, a list of blocks of configurations added to the design (see Block)."""
    shape = "blocks ({fixed: ..., factors: ..., repetitions: N, timeline: true|false})"
    blocks = []
    for index, raw in enumerate(_mappings(value, "also", shape, where), 1):
        context = f"{where}: also[{index}]"
        unknown = sorted(set(map(str, raw)) - _BLOCK_KEYS)
        if unknown:
            raise UsageError(
                f"{context}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_BLOCK_KEYS))})"
            )
        fixed = _fixed(raw.get("fixed"), context)
        factors = _factors(raw.get("factors"), context)
        ranged = [name for name, levels in factors.items() if not isinstance(levels, list)]
        if ranged:
            raise UsageError(
                f"{context}: factors: {ranged[0]}: a block is a full factorial; give a list of "
                "levels"
            )
        both = sorted(set(fixed) & set(factors))
        if both:
            raise UsageError(f"{context}: {both[0]!r} is both fixed and a factor; keep one")
        settings = {**spec.fixed, **fixed, **factors}
        if settings.get("epochs") is not None and settings.get("steps") is not None:
            raise UsageError(
                f"{context}: with the study's fixed settings it sets both epochs and steps; a "
                "run trains for one of them"
            )
        repetitions = _int(raw, "repetitions", spec.repetitions, context, 1, limits.MAX_REPETITIONS)
        timeline = _bool(raw, "timeline", spec.timeline, context)
        blocks.append(Block(fixed, factors, repetitions, timeline))  # type: ignore[arg-type]
    return blocks


def _mappings(value: Any, key: str, shape: str, where: str) -> list[dict]:
    """`key:`, a list of at most MAX_RULES non-empty mappings (none when absent); UsageError
    naming the key and the `shape` of its items otherwise."""
    if value is None:
        return []
    if (
        not isinstance(value, list)
        or not all(isinstance(item, dict) and item for item in value)
        or len(value) > limits.MAX_RULES
    ):
        raise UsageError(f"{where}: {key} must be a list of at most {limits.MAX_RULES:,} {shape}")
    return value


def _exclude(value: Any, spec: StudySpec, where: str) -> list[dict[str, Any]]:
    patterns = []
    for item in _mappings(value, "exclude", "{factor: level, ...} patterns", where):
        pattern = {
            _known_setting(k, f"{where}: exclude"): _coerce(str(k), v, f"{where}: exclude")
            for k, v in item.items()
        }
        _check_known_values(pattern, spec, f"{where}: exclude")
        patterns.append(pattern)
    return patterns


def _check_known_values(pattern: dict[str, Any], spec: StudySpec, context: str) -> None:
    """A pattern over a listed factor must name one of its levels, or it silently matches nothing."""
    for name, level in pattern.items():
        levels = spec.factors.get(name)
        if isinstance(levels, list) and level not in levels:
            raise UsageError(
                f"{context}: {name}={level!r} is not one of the factor's levels {levels}"
            )
