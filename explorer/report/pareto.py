"""Pareto reports: pareto.json, pareto.csv and a self-contained report.html.

The HTML holds the front (memory vs fps, one series per CNN) as an inline SVG drawn by
matplotlib, the constraints as dashed lines, the baselines of `explore baselines` as marked
points and the chosen plan circled; no scripts, no external files.
"""
from __future__ import annotations

import csv
import html
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from explorer.search.pick import Point  # noqa: E402

MB = 2 ** 20


@dataclass
class Baseline:
    """A reference point: label, memory in bytes, fps per CNN (may be empty)."""
    label: str
    memory_bytes: int
    fps: dict[str, float] = field(default_factory=dict)


def front_rows(front: list[Point], cnns: list[str], genes: list[str],
               by_parts: list[list[str]] | None = None) -> list[dict]:
    """One dict per point: memory, fps per CNN, and the layers by parts: `by_parts[i]` for
    point i (the `cnn.layer:k` notation of explorer/report/gene_strip.py), else the labels of
    the genes that are not 0."""
    return [{"memory_bytes": p.memory_bytes, "memory_mb": p.memory_bytes / MB,
             "fps": {c: p.fps.get(c, 0.0) for c in cnns},
             "by_parts": (by_parts[i] if by_parts is not None else
                          [g for g, x in zip(genes, p.genes) if x]),
             "genes": list(p.genes)} for i, p in enumerate(front)]


def write_pareto_json(front: list[Point], cnns: list[str], genes: list[str], path: Path,
                      extra: dict | None = None, by_parts: list[list[str]] | None = None) -> None:
    data = {"cnns": cnns, "genes": genes, "points": front_rows(front, cnns, genes, by_parts)}
    data.update(extra or {})
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def write_pareto_csv(front: list[Point], cnns: list[str], genes: list[str], path: Path,
                     by_parts: list[list[str]] | None = None) -> None:
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["memory_bytes", "memory_mb"] + [f"fps_{c}" for c in cnns]
                     + ["layers_by_parts", "genes"])
        for row in front_rows(front, cnns, genes, by_parts):
            out.writerow([row["memory_bytes"], f"{row['memory_mb']:.6f}"]
                         + [f"{row['fps'][c]:.4f}" for c in cnns]
                         + [" ".join(row["by_parts"]), "".join(map(str, row["genes"]))])


def front_svg(front: list[Point], cnns: list[str], mem: int | None, fps: dict[str, float],
              baselines: list[Baseline], chosen: Point | None) -> str:
    """The front as an SVG string (memory in MB on x, fps on y)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, cnn in enumerate(cnns):
        color = colors[i % len(colors)]
        pts = sorted((p.memory_bytes / MB, p.fps.get(cnn, 0.0)) for p in front)
        ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", ms=4, color=color,
                drawstyle="steps-post", label=f"Pareto front: {cnn}")
        if fps.get(cnn):
            ax.axhline(fps[cnn], ls="--", color=color, lw=1, label=f"T^c {cnn} = {fps[cnn]:g} fps")
        if chosen is not None:
            ax.plot(chosen.memory_bytes / MB, chosen.fps.get(cnn, 0.0), "o", ms=13, mfc="none",
                    mec="black", mew=1.5, label="chosen plan" if i == 0 else None)
    if mem is not None:
        ax.axvline(mem / MB, ls="--", color="red", lw=1, label=f"M^c = {mem / MB:g} MB")
    markers = "sD^vP*Xh"
    for j, base in enumerate(baselines):
        for i, cnn in enumerate(cnns):
            if cnn in base.fps:
                ax.plot(base.memory_bytes / MB, base.fps[cnn], markers[j % len(markers)],
                        color="gray", ms=8, label=base.label if i == 0 else None)
        if not base.fps:
            ax.axvline(base.memory_bytes / MB, ls=":", color="gray", lw=1, label=base.label)
    ax.set_xlabel("memory (MB, 2^20 bytes)")
    ax.set_ylabel("throughput (fps)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]            # drop the XML prologue and doctype


def write_report_html(path: Path, title: str, front: list[Point], cnns: list[str],
                      genes: list[str], mem: int | None, fps: dict[str, float],
                      baselines: list[Baseline], chosen: Point | None, met: bool,
                      notes: list[str] | None = None, pictures: list[tuple[str, dict[str, str]]] = (),
                      strips: list[str] | None = None,
                      by_parts: list[list[str]] | None = None) -> None:
    """The report: the front plotted, `pictures` (a title and partition -> SVG of
    explorer/report/memory_svg.py per plan shown: the chosen plan, the reuse-only plan), the
    baselines, and one row per front point with its genes as a strip (`strips`, one inline SVG
    per point, explorer/report/gene_strip.py) and its layers by parts in the `layer:k` notation
    (`by_parts`, per point; default: the names of the layers whose gene is not 0)."""
    esc = html.escape
    head = "".join(f"<th>fps {esc(c)}</th>" for c in cnns)
    rows = []
    for i, (row, p) in enumerate(zip(front_rows(front, cnns, genes, by_parts), front)):
        mark = ' class="chosen"' if chosen is not None and p.genes == chosen.genes else ""
        cells = "".join(f"<td>{row['fps'][c]:.2f}</td>" for c in cnns)
        split = row["by_parts"]
        parts = esc(", ".join(split)) or "none"
        strip = f"<td>{strips[i]}</td>" if strips is not None else ""
        rows.append(f"<tr{mark}><td>{i}</td><td>{row['memory_mb']:.3f}</td>{cells}"
                    f"<td>{len(split)}</td>{strip}<td class=\"parts\">{parts}</td></tr>")
    figures = "".join(
        f'<section class="pictures" data-plan="{"chosen" if k == 0 else "reuse"}"><h3>{esc(title)}</h3>'
        + "".join(f"<figure>{svg}<figcaption>{esc(part)}</figcaption></figure>"
                  for part, svg in pics.items()) + "</section>"
        for k, (title, pics) in enumerate(pictures))
    memory_section = ("<h2>Memory over the schedule</h2><p>One picture per partition: the arena "
                      "(offset in bytes, down) over the schedule's steps (across); one rectangle "
                      "per stored tensor, dashed when it is a ring of rows, pale with its rows inside when it is a whole tensor stored row by row.</p>"
                      f'<div class="sidebyside">{figures}</div>') if pictures else ""
    base_rows = "".join(
        f"<tr><td>{esc(b.label)}</td><td>{b.memory_bytes / MB:.3f}</td><td>"
        + esc(", ".join(f"{c}: {v:.2f}" for c, v in b.fps.items())) + "</td></tr>"
        for b in baselines)
    cons = (f"M^c = {mem / MB:g} MB" if mem is not None else "no memory constraint") + "; " + (
        ", ".join(f"T^c {esc(c)} = {v:g} fps" for c, v in fps.items() if v) or "no fps constraint")
    verdict = "meets the constraints" if met else "does NOT meet the constraints"
    note_html = "".join(f"<li>{esc(n)}</li>" for n in (notes or []))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td.parts {{ text-align: left; max-width: 40em; overflow-wrap: anywhere; }}
tr.chosen {{ background: #ffe9a8; font-weight: bold; }}
svg {{ max-width: 100%; height: auto; }}
svg.genes {{ vertical-align: middle; }}
div.sidebyside {{ display: flex; flex-wrap: wrap; gap: 2em; }}
section.pictures figure {{ margin: 0 0 1em 0; }}
</style></head><body>
<h1>{esc(title)}</h1>
<p>Constraints: {cons}. Chosen plan: {chosen.memory_bytes / MB if chosen else 0:.3f} MB,
{esc(", ".join(f"{c} {chosen.fps.get(c, 0):.2f} fps" for c in cnns)) if chosen else ""} &mdash;
{verdict}.</p>
<ul>{note_html}</ul>
<figure>{front_svg(front, cnns, mem, fps, baselines, chosen)}</figure>
{memory_section}
<h2>Baselines</h2>
<table><tr><th>baseline</th><th>memory (MB)</th><th>fps</th></tr>{base_rows}</table>
<h2>Pareto front ({len(front)} points)</h2>
<p>Notation: <code>layer</code> runs whole, <code>layer:k</code> by parts of k output rows
per phase; the strip has one cell per gene, darker for fewer rows per part.</p>
<table><tr><th>point</th><th>memory (MB)</th>{head}<th>layers by parts</th>{"<th>genes</th>" if strips is not None else ""}<th>which</th></tr>
{"".join(rows)}</table>
</body></html>
"""
    Path(path).write_text(page)
