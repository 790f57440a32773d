"""The report: findings first, then one section per figure family, the data-quality notes and
what was skipped and why; written as report.md and a self-contained report.html, with the
figures (PNG + SVG) and every table as CSV beside them."""

from __future__ import annotations

import base64
import html
import math
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from archbench.analysis import (
    accuracy,
    claims,
    effects,
    findings,
    placement,
    scaling,
    timesplit,
    transfer,
)
from archbench.analysis.load import Study, format_level, load_study
from archbench.analysis.section import FigureFile, Section, Table

BUILDERS: tuple[tuple[str, Callable[[Study, Path], Section]], ...] = (
    ("Throughput and scaling", scaling.build),
    ("Where the time goes", timesplit.build),
    ("Parameter-server placement and mode", placement.build),
    ("Time to accuracy", accuracy.build),
    ("Factor effects", effects.build),
    ("Optima and transfer across workloads", transfer.build),
    ("The research notes' claims, checked", claims.build),
)


def _ms(value: Any) -> str:
    return findings.num(1000 * value) if _is_number(value) else "n/a"


def _pct(value: Any) -> str:
    return f"{100 * value:.1f}%" if _is_number(value) else "n/a"


def _points(value: Any) -> str:
    return f"{100 * value:+.1f}" if _is_number(value) else "n/a"


def _x(value: Any) -> str:
    return f"{findings.num(value)}×" if _is_number(value) else "n/a"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return (
            findings.num(value) if not value.is_integer() or abs(value) >= 1e4 else str(int(value))
        )
    return str(value)


# table name -> [(column, header, formatter)]; columns a table lacks are left out.
COLUMNS: dict[str, list[tuple[str, str, Callable[[Any], str]]]] = {
    "claims": [
        ("claim", "claim", _plain),
        ("workload", "workload", _plain),
        ("setting", "setting", _plain),
        ("comparison", "throughput ratio", _plain),
        ("measured", "measured [95% CI]", _plain),
        ("claimed", "claimed", _plain),
        ("verdict", "verdict", _plain),
        ("n", "reps", _plain),
        ("why", "why", _plain),
    ],
    "scaling": [
        ("workload", "workload", _plain),
        ("link", "link", _plain),
        ("batch_size", "batch/worker", _plain),
        ("arch", "arch", _plain),
        ("workers", "workers", _plain),
        ("config", "fastest configuration", _plain),
        ("samples_per_s", "samples/s", _plain),
        ("samples_per_s_std", "± std", _plain),
        ("within_run_low", "at step p90 (one run)", _plain),
        ("within_run_high", "at step p10 (one run)", _plain),
        ("n", "reps", _plain),
        ("speedup", "speed-up vs single", _x),
        ("speedup_std", "± std", _plain),
        ("efficiency", "scaling efficiency", _pct),
    ],
    "timesplit": [
        ("workload", "workload", _plain),
        ("arch", "arch", _plain),
        ("workers", "workers", _plain),
        ("link", "link", _plain),
        ("compute_s", "compute (ms)", _ms),
        ("exposed_comm_s", "exposed comm. (ms)", _ms),
        ("comm_s", "exchange (ms)", _ms),
        ("comm_share", "exposed share of step", _pct),
        ("hidden_share", "exchange hidden by overlap", _pct),
        ("n", "reps", _plain),
    ],
    "placement_ratio": [
        ("setting", "setting", _plain),
        ("numerator_samples_per_s", "dedicated samples/s", _plain),
        ("denominator_samples_per_s", "co-located samples/s", _plain),
        ("ratio", "ratio", _x),
        ("ci_low", "95% CI low", _plain),
        ("ci_high", "95% CI high", _plain),
        ("ratio_std", "± std (propagated)", _plain),
        ("within_run_low", "within-run low", _plain),
        ("within_run_high", "within-run high", _plain),
        ("n_numerator", "reps (ded.)", _plain),
        ("n_denominator", "reps (co-loc.)", _plain),
    ],
    "sync_ratio": [
        ("setting", "setting", _plain),
        ("numerator_samples_per_s", "async samples/s", _plain),
        ("denominator_samples_per_s", "sync samples/s", _plain),
        ("ratio", "ratio", _x),
        ("ci_low", "95% CI low", _plain),
        ("ci_high", "95% CI high", _plain),
        ("ratio_std", "± std (propagated)", _plain),
        ("within_run_low", "within-run low", _plain),
        ("within_run_high", "within-run high", _plain),
        ("accuracy_diff", "accuracy async − sync (points)", _points),
        ("n_numerator", "reps (async)", _plain),
        ("n_denominator", "reps (sync)", _plain),
    ],
    "time_to_target": [
        ("workload", "workload", _plain),
        ("arch", "arch", _plain),
        ("config", "configuration", _plain),
        ("target_accuracy", "target", _pct),
        ("reached", "reps reaching it", _plain),
        ("n", "reps", _plain),
        ("time_to_target_s", "time to target (s)", _plain),
        ("time_to_target_std", "± std", _plain),
        ("final_accuracy", "final accuracy", _pct),
    ],
    "effect_ranking": [
        ("response", "response", lambda v: findings.RESPONSE_NAMES.get(v, str(v))),
        ("factor", "factor", _plain),
        ("levels", "levels", _plain),
        ("eta_sq", "η²", _plain),
        ("p_value", "p (F test)", _plain),
        ("n", "runs", _plain),
    ],
    "best_config": [
        ("workload", "workload", _plain),
        ("config", "fastest configuration", _plain),
        ("epoch_s", "time per epoch (s)", _plain),
        ("epoch_s_std", "± std", _plain),
        ("n", "reps", _plain),
        ("test_accuracy", "test accuracy", _pct),
        ("configs_measured", "configurations", _plain),
        ("runner_up_slowdown", "runner-up slowdown", _x),
    ],
    "transfer": [
        ("workload_a", "A", _plain),
        ("workload_b", "B", _plain),
        ("matched", "matched configs", _plain),
        ("pearson_r", "Pearson r", _plain),
        ("spearman_rho", "Spearman ρ", _plain),
        ("top_overlap", "top-10% overlap", _plain),
        ("top_k", "of", _plain),
        ("a_best_rank_in_b", "A's best: rank in B", _plain),
        ("a_best_slowdown_in_b", "A's best: slowdown in B", _x),
        ("b_best_rank_in_a", "B's best: rank in A", _plain),
        ("b_best_slowdown_in_a", "B's best: slowdown in A", _x),
    ],
}
HIDDEN_TABLES = frozenset({"main_effects"})  # CSV only: the figure shows it


@dataclass
class Report:
    markdown: Path
    html: Path
    sections: list[Section]
    findings: list[str]
    study: Study

    @property
    def figures(self) -> list[FigureFile]:
        return [f for s in self.sections for f in s.figures]

    @property
    def skipped(self) -> list[str]:
        return [line for s in self.sections for line in s.skipped]


def display_rows(table: Table) -> tuple[list[str], list[list[str]]]:
    spec = COLUMNS.get(table.name)
    frame = table.frame
    if spec is None:
        spec = [(c, c, _plain) for c in frame.columns]
    spec = [s for s in spec if s[0] in frame.columns]
    # Columns that say nothing here (all n/a) are dropped.
    spec = [s for s in spec if frame[s[0]].notna().any()]
    headers = [header for _, header, _ in spec]
    rows = [[fmt(row[col]) for col, _, fmt in spec] for _, row in frame.iterrows()]
    return headers, rows


def overview_table(study: Study) -> Table:
    frame = study.frame
    counts = (
        frame.assign(arch=frame["arch"].fillna("?"))
        .groupby(["workload", "arch", "status"])
        .size()
        .unstack("status", fill_value=0)
        .reset_index()
    )
    return Table("runs", "Runs per workload and architecture, by status", counts)


def factor_levels(study: Study) -> list[str]:
    from archbench.analysis.load import factor_column, level_sort_key

    lines = []
    for name in study.factors:
        values = study.frame[factor_column(name)].dropna().unique()
        levels = ", ".join(format_level(v) for v in sorted(values, key=level_sort_key))
        lines.append(f"`{name}`: {levels}")
    return lines


def failed_table(study: Study) -> Table | None:
    bad = study.not_ok
    if bad.empty:
        return None
    frame = pd.DataFrame(
        {
            "run": bad["run_id"].fillna(bad["source"]),
            "status": bad["status"],
            "workload": bad["workload"],
            "configuration": bad["config"],
            "error": bad["error"].fillna("(no error recorded)").map(lambda e: str(e)[:160]),
        }
    )
    return Table("failed_runs", "Runs that did not finish", frame)


def _blocks(report_title: str, study: Study, sections: list[Section], found: list[str]) -> list:
    blocks: list[tuple[str, Any]] = [("h1", report_title)]
    sources = ", ".join(str(p) for p in study.sources)
    blocks.append(("p", f"Records: {sources}. Generated by `archbench report`."))
    blocks.append(("h2", "Findings"))
    blocks.append(("ul", found or ["No finding could be computed from these records."]))
    blocks.append(("h2", "The study"))
    blocks.append(("table", overview_table(study)))
    levels = factor_levels(study)
    if levels:
        how = "as the records list them" if study.factors_declared else "inferred from the records"
        blocks.append(("p", f"Factors and their levels ({how}):"))
        blocks.append(("ul", levels))
    for section in sections:
        blocks.append(("h2", section.title))
        if section.how_to_read and (section.figures or section.tables):
            blocks.append(("p", f"*How to read:* {section.how_to_read}"))
        for figure in section.figures:
            blocks.append(("figure", figure))
        for table in section.tables:
            if table.name not in HIDDEN_TABLES:
                blocks.append(("table", table))
        if section.notes:
            blocks.append(("ul", section.notes))
        if section.skipped:
            blocks.append(("p", "Not drawn: " + "; ".join(section.skipped) + "."))
    blocks.append(("h2", "Data quality"))
    blocks.append(("ul", study.notes or ["Every record was complete and every run finished."]))
    failed = failed_table(study)
    if failed is not None:
        blocks.append(("table", failed))
    blocks.append(("h2", "Skipped and why"))
    skipped = [line for s in sections for line in s.skipped]
    blocks.append(("ul", skipped or ["Nothing: the study held the data for every figure."]))
    return blocks


def render_markdown(blocks: list, out_dir: Path) -> str:
    lines: list[str] = []
    for kind, content in blocks:
        if kind == "h1":
            lines += [f"# {content}", ""]
        elif kind == "h2":
            lines += [f"## {content}", ""]
        elif kind == "p":
            lines += [content, ""]
        elif kind == "ul":
            lines += [f"- {item}" for item in content] + [""]
        elif kind == "figure":
            rel = content.png.relative_to(out_dir).as_posix()
            svg = content.paths[1].relative_to(out_dir).as_posix()
            lines += [f"![{content.caption}]({rel})", "", f"*{content.caption}* ([SVG]({svg}))", ""]
        elif kind == "table":
            headers, rows = display_rows(content)
            lines += [f"**{content.title}** (`tables/{content.name}.csv`)", ""]
            lines.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
            lines.append("|" + "|".join("---" for _ in headers) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_INLINE = [
    (re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*([^*]+)\*"), r"<em>\1</em>"),
]


def _inline_html(text: str) -> str:
    escaped = html.escape(text, quote=False)
    for pattern, replacement in _INLINE:
        escaped = pattern.sub(replacement, escaped)
    return escaped


HTML_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-style: italic; color: #555; }
code { background: #f5f5f5; padding: 0 0.2em; }
"""


def render_html(blocks: list, out_dir: Path) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">']
    title = next((c for k, c in blocks if k == "h1"), "archbench report")
    parts += [f"<title>{html.escape(title)}</title>", f"<style>{HTML_STYLE}</style></head><body>"]
    for kind, content in blocks:
        if kind in ("h1", "h2"):
            parts.append(f"<{kind}>{html.escape(content)}</{kind}>")
        elif kind == "p":
            parts.append(f"<p>{_inline_html(content)}</p>")
        elif kind == "ul":
            items = "".join(f"<li>{_inline_html(item)}</li>" for item in content)
            parts.append(f"<ul>{items}</ul>")
        elif kind == "figure":
            # The PNG is embedded, so the HTML file stands alone.
            data = base64.b64encode(content.png.read_bytes()).decode("ascii")
            svg = content.paths[1].relative_to(out_dir).as_posix()
            parts.append(
                f'<figure><img src="data:image/png;base64,{data}" '
                f'alt="{html.escape(content.caption)}"><figcaption>'
                f'{html.escape(content.caption)} (<a href="{svg}">SVG</a>)</figcaption></figure>'
            )
        elif kind == "table":
            headers, rows = display_rows(content)
            head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
            body = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                for row in rows
            )
            parts.append(
                f"<p><strong>{html.escape(content.title)}</strong></p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            )
    parts.append("</body></html>")
    return "\n".join(parts)


def _clear_outputs(out_dir: Path) -> None:
    """Remove the figures and tables of an earlier report, so none is left stale."""
    for folder, patterns in (("figures", ("*.png", "*.svg")), ("tables", ("*.csv",))):
        for pattern in patterns:
            for path in (out_dir / folder).glob(pattern):
                path.unlink()


def build_sections(study: Study, fig_dir: Path) -> list[Section]:
    sections = []
    for title, builder in BUILDERS:
        try:
            sections.append(builder(study, fig_dir))
        except Exception as exc:  # one broken figure must not cost the whole report
            traceback.print_exc(file=sys.stderr)
            section = Section(builder.__module__.rsplit(".", 1)[-1], title)
            section.skip(title, f"internal error while drawing it ({type(exc).__name__}: {exc})")
            sections.append(section)
    return sections


def write_report(path: Path, out_dir: Path | None = None) -> Report:
    """Load the records at `path` and write the report under `out_dir` (default: <study>/report)."""
    study = load_study(path)  # raises UsageError before anything is written
    if out_dir is None:
        out_dir = (path if path.is_dir() else path.parent) / "report"
    fig_dir = out_dir / "figures"
    table_dir = out_dir / "tables"
    _clear_outputs(out_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    table_dir.mkdir(parents=True, exist_ok=True)
    sections = build_sections(study, fig_dir)
    found = findings.collect(study, sections)
    extra_tables = [overview_table(study)]
    failed = failed_table(study)
    if failed is not None:
        extra_tables.append(failed)
    for table in [t for s in sections for t in s.tables] + extra_tables:
        table.frame.to_csv(table_dir / f"{table.name}.csv", index=False)
    title = f"archbench report: {study.name}" if study.name else "archbench report"
    blocks = _blocks(title, study, sections, found)
    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(blocks, out_dir), encoding="utf-8")
    html_path = out_dir / "report.html"
    html_path.write_text(render_html(blocks, out_dir), encoding="utf-8")
    return Report(markdown, html_path, sections, found, study)
