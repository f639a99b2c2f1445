"""Benchmark results as JSON, and the JSON as tables.

Every benchmark's ``--json PATH`` writes one file in the schema below; the files committed
under ``benchmarks/results/`` are what the documentation's benchmarks page shows (the Sphinx
extension ``docs/_ext/benchmark_tables.py`` reads them at build time through :func:`load`
and :func:`cells`). Nothing on that page is typed by hand.

Schema (version 1), one JSON object per file::

    {
      "schema": 1,
      "name": "joint_qp",                      # unique id, used as the section anchor
      "title": "Joint QP: structlp against raw Clarabel",
      "description": "what is measured, on which data",
      "command": "python benchmarks/bench_joint_qp.py --sizes 10 100 --json ...",
      "date": "2026-12-02T01:50:00+00:00",     # UTC, ISO 8601
      "machine": {"cpu": "model name", "cores": 2, "platform": "...", "python": "3.11.7",
                  "load": [1.0, 0.8, 0.5]},    # os.getloadavg() when the run started
      "versions": {"structlp": "0.1.0", "numpy": "...", ...},
      "floor": {"name": "raw Clarabel", "description": "what the ratios divide by"},
      "tables": [
        {"caption": "optional",
         "columns": [{"key": "m", "label": "examples"},
                     {"key": "fit", "label": "structlp fit", "unit": "s"},
                     {"key": "ratio", "label": "fit / floor", "ratio": true}],
         "rows": [{"m": 10, "fit": 0.12, "ratio": 1.7}, ...]}
      ],
      "notes": ["optional sentences printed under the tables"],
      "runs": 5,                               # optional: runs behind each figure
      "runs_note": "median of 5 runs"          # optional: how they are combined
    }

Required: ``schema``, ``name``, ``title``, ``description``, ``date``, ``machine`` (with
``cpu`` and ``cores``), ``floor`` (with ``name`` and ``description``) and ``tables`` (each
with ``columns``, every column with ``key`` and ``label``, and ``rows``). A column may say
``"unit"`` (shown in its header), ``"ratio": true`` (shown as ``1.23×``) and ``"format"`` (a
Python format spec such as ``".2e"``) and ``"plot": true`` (plotted in preference to the
other columns on the page). A cell missing from a row is shown as ``–``.
A table comparing worker counts gives each row ``n_jobs`` (1 for the reference run),
``seconds`` (the fit), optionally ``parallel_part`` (the seconds of the part that ``n_jobs``
spreads over the workers, in that run), ``what`` (what ``n_jobs`` does on that route) and
``same`` (whether the result equals the serial run's); :func:`speedup_notes` explains each
parallel row from these (printed under the table).
``runs`` (an integer >= 1) says how many runs each figure comes from (the fewest, where
figures differ) and ``runs_note`` how they are combined (median, fastest); a table may carry its own ``runs`` and ``runs_note``
where they differ from the file's (a table from one fit in a file of repeated timings).

Run ``python benchmarks/report.py [FOLDER]`` to print the tables as Markdown.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
import sys
from pathlib import Path

SCHEMA = 1
RESULTS = Path(__file__).resolve().parent / "results"


class SchemaError(ValueError):
    """A benchmark JSON file that does not follow the schema (the message names the file)."""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict:
    """CPU model, logical cores, platform, Python version and the load average now."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        load = None
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "load": load}


def versions(*modules: str) -> dict:
    """Versions of structlp and of the named modules that are importable, and where
    structlp's compiled kernels came from (``structlp.compiled.status()``: ``ahead of
    time`` with its build, ``structlp.compiled.target()``, or numba's JIT)."""
    out = {}
    for name in ("structlp", "numpy", "scipy", "cvxpy") + tuple(modules):
        try:
            out[name] = __import__(name).__version__
        except Exception:   # not installed, or no __version__: left out
            pass
    try:
        import structlp.compiled
        out["structlp kernels"] = structlp.compiled.status()
        target = getattr(structlp.compiled, "target", lambda: None)()
        if target:
            out["structlp kernels"] += f" ({target})"
    except Exception:       # an older structlp
        pass
    return out


def write(path, *, name, title, description, floor, tables, command=None, notes=(),
          modules=(), started=None, runs=None, runs_note=None):
    """Write one benchmark's results in the schema (validated first) and return the dict.

    ``floor`` is ``(name, description)`` or a dict with those keys; ``tables`` a list of
    ``{"caption"?, "columns", "rows", "runs"?, "runs_note"?}``; ``started`` the
    :func:`machine` dict taken when the run began (its load average describes the run;
    default: now); ``runs`` the number of runs behind each figure and ``runs_note`` how they
    are combined (e.g. ``"median"``).
    """
    if isinstance(floor, (tuple, list)):
        floor = {"name": floor[0], "description": floor[1]}
    data = {
        "schema": SCHEMA, "name": name, "title": title, "description": description,
        "command": command or _command(),
        "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        "machine": started or machine(), "versions": versions(*modules),
        "floor": floor, "tables": tables, "notes": list(notes),
    }
    if runs is not None:
        data["runs"] = runs
    if runs_note:
        data["runs_note"] = runs_note
    data = json.loads(json.dumps(data, default=_plain))
    validate(data, path)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    return data


def _script() -> str:
    """This run's script, named from the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(RESULTS.parents[1])
    except ValueError:
        script = Path(script.name)
    return script.as_posix()


def _command() -> str:
    """How this run was started, the script named from the repository root."""
    return " ".join(["python", _script()] + sys.argv[1:])


def command_with(placeholders, argv=None) -> str:
    """How this run was started (the script named from the repository root, the arguments
    ``argv`` (default ``sys.argv[1:]``) quoted for a shell), with the values of the options
    in ``placeholders`` (option -> placeholder, e.g. an interpreter's path) replaced by the
    placeholders: no path of the machine goes into the results."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = []
    for i, a in enumerate(args):
        key = a.split("=", 1)[0]
        if key in placeholders and "=" in a:
            out.append(f"{key}={placeholders[key]}")
        elif i and args[i - 1] in placeholders:
            out.append(placeholders[args[i - 1]])
        else:
            out.append(a)
    return shlex.join(["python", _script()] + out)


def _plain(obj):
    try:                       # numpy scalars and arrays
        return obj.tolist()
    except AttributeError:
        raise TypeError(f"cannot write {type(obj).__name__} to benchmark JSON") from None


def validate(data, source="<data>") -> dict:
    """Check ``data`` against the schema; raise :class:`SchemaError` naming ``source``."""
    def need(obj, key, kind, where):
        if not isinstance(obj, dict) or key not in obj:
            raise SchemaError(f"{source}: {where} needs the key {key!r}")
        if not isinstance(obj[key], kind):
            raise SchemaError(f"{source}: {where}[{key!r}] must be {kind.__name__}, "
                              f"got {type(obj[key]).__name__}")
        return obj[key]

    if not isinstance(data, dict):
        raise SchemaError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise SchemaError(f"{source}: 'schema' must be {SCHEMA}, got {data.get('schema')!r}")
    for key in ("name", "title", "description", "date"):
        need(data, key, str, "the file")
    mach = need(data, "machine", dict, "the file")
    need(mach, "cpu", str, "machine")
    need(mach, "cores", int, "machine")
    floor = need(data, "floor", dict, "the file")
    need(floor, "name", str, "floor")
    need(floor, "description", str, "floor")
    tables = need(data, "tables", list, "the file")
    if not tables:
        raise SchemaError(f"{source}: 'tables' is empty")
    for t, table in enumerate(tables):
        cols = need(table, "columns", list, f"tables[{t}]")
        rows = need(table, "rows", list, f"tables[{t}]")
        for c, col in enumerate(cols):
            need(col, "key", str, f"tables[{t}].columns[{c}]")
            need(col, "label", str, f"tables[{t}].columns[{c}]")
        for r, row in enumerate(rows):
            if not isinstance(row, dict):
                raise SchemaError(f"{source}: tables[{t}].rows[{r}] must be an object")
    for where, obj in [("the file", data)] + [(f"tables[{t}]", tb) for t, tb in enumerate(tables)]:
        if "runs" in obj and (not isinstance(obj["runs"], int) or isinstance(obj["runs"], bool)
                              or obj["runs"] < 1):
            raise SchemaError(f"{source}: {where}['runs'] must be an integer >= 1, "
                              f"got {obj['runs']!r}")
        if "runs_note" in obj and not isinstance(obj["runs_note"], str):
            raise SchemaError(f"{source}: {where}['runs_note'] must be str, "
                              f"got {type(obj['runs_note']).__name__}")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise SchemaError(f"{source}: 'notes' must be a list of strings")
    return data


def load_one(path) -> dict:
    """One benchmark JSON file, validated."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path.name}: not JSON ({exc})") from None
    return validate(data, path.name)


def load(folder=RESULTS) -> list[dict]:
    """Every ``*.json`` file of ``folder``, validated, sorted by file name."""
    return [load_one(path) for path in sorted(Path(folder).glob("*.json"))]


def fmt(value, col) -> str:
    """One cell as text: ``–`` when missing, ``not reached`` for NaN (a target the run did
    not reach), ``1.23×`` for a ratio, 3 significant digits."""
    if value is None:
        return "–"
    if isinstance(value, float) and math.isnan(value):
        return "not reached"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if "format" in col:
        return format(value, col["format"])
    if col.get("ratio"):
        return f"{value:.3g}×" if value < 100 else f"{value:,.0f}×"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"
    return str(value)


def runs(data, table=None) -> str:
    """How many runs each figure (of ``table``, else of the file) is from: the table's
    ``runs``, else the file's, else the ``--repeats N`` of its command, else that the file
    does not say."""
    for obj in (table or {}, data):
        if obj.get("runs"):
            n = obj["runs"]
            how = obj.get("runs_note") or ("a single run" if n == 1 else "")
            return f"{n} ({how})" if how else str(n)
        if obj.get("runs_note"):
            return obj["runs_note"]
    import re
    found = sorted({int(n) for n in re.findall(r"--repeats?[ =](\d+)", data.get("command") or "")})
    if found:
        return " or ".join(map(str, found)) + " (median; --repeats of the command)"
    return "not stated in the results file (single runs unless a caption says otherwise)"


def runs_count(data, table=None):
    """The number of runs behind the figures of ``table`` (else the file), or None when the
    file does not say."""
    for obj in (table or {}, data):
        if obj.get("runs"):
            return obj["runs"]
    return None


LOADED = 2.0   # a load average above this at the start marks a run as made on a loaded machine


def loaded(data) -> bool:
    """Whether the run started at a load average above :data:`LOADED`."""
    load = data["machine"].get("load")
    return bool(load) and load[0] > LOADED


def speedup_notes(data, table) -> list[str]:
    """One paragraph per parallel row of ``table`` (a row with ``n_jobs`` > 1, measured
    against the row with ``n_jobs`` 1): what ``n_jobs`` does there, the best speed-up the
    serial run's share of parallel work allows (Amdahl's law), the measured one, and where
    the difference went; all from the row's numbers."""
    rows = [r for r in table["rows"] if isinstance(r.get("n_jobs"), int)]
    serial = next((r for r in rows if r["n_jobs"] == 1), None)
    if serial is None or not _finite(serial.get("seconds")):
        return []
    out = []
    load = (data["machine"].get("load") or [None])[0]
    cores = data["machine"].get("cores")
    for row in rows:
        k = row["n_jobs"]
        if k <= 1 or not _finite(row.get("seconds")):
            continue
        T, Tk = serial["seconds"], row["seconds"]
        text = f"n_jobs={k}: " + (row["what"].rstrip(".") + ". " if row.get("what") else "")
        speedup = T / Tk
        p, pk = serial.get("parallel_part"), row.get("parallel_part")
        if _finite(p) and 0 < p <= T:
            best = T / (T - p + p / k)
            text += (f"In the serial fit that part took {p:.3g} of its {T:.3g} s "
                     f"({100 * p / T:.0f}%), so {k} workers could make the fit at most "
                     f"{best:.2f}× faster (the rest runs in one process whatever n_jobs); ")
            text += f"it was {speedup:.2f}× " + ("faster" if speedup >= 1 else "as fast")
            if _finite(pk):
                extra = pk - p / k
                text += (f", the parallel part taking {pk:.3g} s against the {p / k:.3g} s of a "
                         f"perfect split over {k} workers")
                if extra > 0:
                    text += (f": {extra:.3g} s went to handing the work to the workers and "
                             "collecting their answers")
                    if load is not None and cores:
                        text += (f", and to waiting for a core (the run started at load "
                                 f"{load:.3g} on {cores} cores)")
            text += ". "
        else:
            text += f"Measured: {speedup:.2f}× the serial fit's speed. "
        same = str(row.get("same", "")).strip().lower()
        if same == "true":
            text += "The result equals the serial fit's bit for bit."
        elif same == "false":
            text += ("The result differs from the serial fit's, which the parallel guide "
                     "says must not happen: a defect to report.")
        out.append(text.strip())
    return out


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def header(col) -> str:
    return f"{col['label']} ({col['unit']})" if col.get("unit") else col["label"]


def cells(table) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of one table as strings."""
    cols = table["columns"]
    return ([header(c) for c in cols],
            [[fmt(row.get(c["key"]), c) for c in cols] for row in table["rows"]])


def machine_line(data) -> str:
    m = data["machine"]
    text = f"{m['cpu']}, {m['cores']} logical cores"
    if m.get("load"):
        text += f", load average {m['load'][0]:.3g} at the start"
        if m["load"][0] > LOADED:
            text += " (a loaded machine: the seconds are noisy, the ratios less so)"
    return f"{text}; {data['date'].replace('T', ' ')}"


def markdown(data) -> str:
    """One benchmark as Markdown (what ``python benchmarks/report.py`` prints)."""
    lines = [f"## {data['title']}", "", data["description"], "",
             f"Floor: {data['floor']['name']} ({data['floor']['description']}).", "",
             f"Machine: {machine_line(data)}.", "",
             f"Runs per figure: {runs(data)}.", ""]
    for table in data["tables"]:
        if table.get("caption"):
            lines += [table["caption"], ""]
        if table.get("runs") or table.get("runs_note"):
            lines += [f"Runs per figure: {runs(data, table)}.", ""]
        head, rows = cells(table)
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
        lines += [n + "\n" for n in speedup_notes(data, table)]
    lines += [n + "\n" for n in data.get("notes", [])]
    if data.get("command"):
        lines.append(f"Command: `{data['command']}`")
    return "\n".join(lines)


def main(argv=None):
    folder = (argv if argv is not None else sys.argv[1:]) or [RESULTS]
    print("\n\n".join(markdown(d) for d in load(folder[0])))


if __name__ == "__main__":
    main()
