"""The leaves every module may use: errors, the architectures' table, link rates, host lists,
bounded JSON, safe text, output folders, process groups, and where a study stands."""
