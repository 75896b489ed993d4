"""The matrix as ONE self-contained HTML page: ``matrix.html``.

Inline CSS and JS, no network, no URL at all: the page is a CI artifact opened from disk,
perhaps years later, perhaps offline. Everything is rendered here, server side, so the page
reads without JavaScript (and a test can check it with ``html.parser``); the script only
filters (failures only, by tool, by crash point, by cause; a text search of the failures),
recomputes the totals for what is shown, and opens the case a link points at.

The page opens with the failures' causes (``reports.causes``: each with its counts and one
case to rerun) and the matrix, each failing cell naming its causes by code and on hover;
the full list of failures follows. Counts are ``passed/cases`` (``matrix.COUNTS``).

Hooks a browser test may rely on (kept stable): ``#causes`` (``tr.cause[data-cause]``,
``button.cause-only[data-cause]``), the controls ``#only-failures``, ``#tool-filter``,
``#boundary-filter``, ``#cause-filter``, ``#failure-search``; the matrix rows ``tr.row``
with cells ``td.cell[data-col][data-passed][data-cases][data-failed][data-causes]`` and
``td.row-total``; the totals row ``tr#totals`` (``td[data-col]``, ``td#grand-total``);
``#failures`` with ``li.failure`` and ``#failures-shown``; ``details.case`` and ``#shown``;
the scorecard ``#scorecard`` with ``#scorecard-legend``, ``table#scorecard-seed004`` and
``table#scorecard-crash`` (cells ``td.eval[data-eval][data-passed][data-cases]``, counts
``passed/cases`` as ``scorecard.COUNTS`` says) and ``#scorecard-failing`` (each failing
crash eval with its why). Every table stands in a ``div.table-box`` that scrolls, so the
page fits a 1280 px window; not applicable and not reached have colours of their own.

Every case has a detail view: its timeline (each life's start, the crash, each restart,
session lines and world events in the order they happened), expected vs observed, the
broken invariants, what the world ended with compared to the clean run, and the command
that reruns it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from crashmatrix.harness.core.evals import CRASH_QUESTIONS
from crashmatrix.reports.causes import Causes, codes, reasons
from crashmatrix.reports.matrix import COLUMNS, COUNTS, LABELS, Cell, Matrix
from crashmatrix.reports.results import FAILING, CaseRecord, Results
from crashmatrix.reports.scorecard import COUNTS as SCORECARD_COUNTS
from crashmatrix.reports.scorecard import EvalRow, Scorecard

__all__ = [
    "CSS",
    "MARKS",
    "SCRIPT",
    "case_anchor",
    "causes_section",
    "matrix_table",
    "not_run_section",
    "page",
    "render_html",
    "scorecard_legend",
    "table_box",
    "text",
]

MARKS = {
    "pass": "✓",
    "fail": "✗",
    "indeterminate": "~",
    "not_reached": "·",
    "not_reachable": "⊘",
    "deselected": "»",
    "not_applicable": "–",
}
_STATE_NAMES = {
    "pass": "pass",
    "fail": "fail",
    "indeterminate": "allowed-indeterminate",
    "not_reached": "not reached",
    "not_reachable": "not reachable by this agent",
    "deselected": "deselected",
    "not_applicable": "not applicable",
}

CSS = """
:root{--pass:#1b7f3b;--pass-bg:#e3f4e8;--fail:#b3261e;--fail-bg:#fde7e7;--ind:#8a6100;--ind-bg:#fff4d1;
--nr:#6b6b6b;--nr-bg:#f1f1f1;--na:#5b4b8a;--na-bg:#ece8f6;--line:#d9d9de;--dim:#6b6b75;--diff:#fff1b8}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
color:#1d1d22;background:#fafafb}
header,section{padding:12px 16px}
header{background:#fff;border-bottom:1px solid var(--line)}
h1{font-size:20px;margin:0 0 4px}
h2{font-size:16px;margin:16px 0 8px}
h4{font-size:13px;margin:12px 0 4px;color:#33333a}
.headline{font-size:18px;font-weight:600;margin:0}
.headline.ok{color:var(--pass)}.headline.bad{color:var(--fail)}
.dim{color:var(--dim)}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f3f3f6;padding:8px;border-radius:4px;white-space:pre-wrap;word-break:break-all;margin:0}
.controls{display:flex;gap:18px;align-items:center;flex-wrap:wrap;margin:4px 0 10px}
.legend{display:flex;gap:14px;flex-wrap:wrap;margin:0 0 10px;font-size:13px}
.legend span{display:inline-flex;gap:6px;align-items:center}
.swatch{display:inline-block;width:22px;height:16px;border-radius:3px;text-align:center;font-size:12px;line-height:16px}
table.matrix{border-collapse:collapse;background:#fff;font-size:13px}
.table-box{max-width:100%;overflow:auto;margin:0 0 10px}
.table-box.tall{max-height:85vh}
table.scorecard thead th{white-space:normal;min-width:6em}
table.matrix td.why{white-space:normal;text-align:left;min-width:18em;overflow-wrap:anywhere}
table.matrix th,table.matrix td{border:1px solid var(--line);padding:3px 4px;text-align:center;
white-space:nowrap}
table.matrix thead th{position:sticky;top:0;z-index:2;background:#fff;font-weight:600;font-size:12px;
white-space:normal}
table.matrix th[scope=row]{text-align:left;font-weight:500;position:sticky;left:0;z-index:1;background:#fff}
table.matrix tfoot th[scope=row]{background:#f6f6f8}
table.matrix tr.group th{text-align:left;background:#f0f0f4;font-weight:600;font-size:12px;color:#44444c}
table.matrix tfoot th,table.matrix tfoot td{background:#f6f6f8;font-weight:600}
td.cell a,td.eval a{display:block;color:inherit;text-decoration:none;min-width:42px}
td.cell a:hover{text-decoration:underline}
.pass{background:var(--pass-bg);color:var(--pass)}
.fail{background:var(--fail-bg);color:var(--fail);font-weight:700}
.indeterminate{background:var(--ind-bg);color:var(--ind)}
.not_reached{background:var(--nr-bg);color:var(--nr)}
.not_applicable{background:var(--na-bg);color:var(--na);font-style:italic}
.not_reachable{background:repeating-linear-gradient(135deg,#f1f1f1 0 4px,#e2e2e6 4px 8px);color:#55555c}
.deselected{background:#fff;color:var(--nr)}
td.differs{outline:3px solid #e0a800;outline-offset:-3px}
td.total{font-variant-numeric:tabular-nums}
#failures ul{margin:0;padding-left:18px}
#failures li{margin:2px 0}
details.case{background:#fff;border:1px solid var(--line);border-left:5px solid #aaa;
border-radius:4px;margin:6px 0}
details.case.state-pass{border-left-color:var(--pass)}
details.case.state-fail{border-left-color:var(--fail)}
details.case.state-indeterminate{border-left-color:#e0a800}
details.case.state-not_applicable{border-left-color:var(--na);border-left-style:dashed}
details.case:target{box-shadow:0 0 0 2px #4a7bd0}
details.case>summary{cursor:pointer;padding:6px 10px;display:flex;gap:10px;align-items:baseline;
flex-wrap:wrap}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600}
.case-body{display:grid;grid-template-columns:minmax(360px,1fr) minmax(360px,1fr);gap:18px;
padding:0 14px 12px}
@media (max-width:900px){.case-body{grid-template-columns:1fr}}
.case-body>div{min-width:0}
.case-body code,#failures code{overflow-wrap:anywhere}
ol.timeline{list-style:none;margin:0;padding:0;
font:12.5px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
ol.timeline li{padding:1px 8px;border-left:4px solid transparent;white-space:pre-wrap}
ol.timeline li.l1{border-left-color:#4a7bd0}ol.timeline li.l2{border-left-color:#8e5cc4}
ol.timeline li.l3{border-left-color:#c47a2c}ol.timeline li.l4{border-left-color:#2c9ac4}
ol.timeline li.start{font-weight:700;margin-top:4px}
ol.timeline li.restart{background:#eef3fd}
ol.timeline li.crash{background:var(--fail-bg);color:var(--fail);font-weight:700}
ol.timeline li.exit{color:var(--pass);font-weight:600}
ol.timeline li.world{background:#fff6e0}
ol.timeline li.more{color:var(--dim);font-style:italic}
details.second{border-left:3px solid var(--line);margin:6px 0 6px 2px;padding-left:8px}
details.second>summary{cursor:pointer}
.ln{display:inline-block;min-width:34px;color:var(--dim)}
table.eo{border-collapse:collapse;width:100%;font-size:12.5px}
table.eo th,table.eo td{border-bottom:1px solid #ececf0;padding:2px 6px;text-align:left;vertical-align:top}
table.eo tr.bad td{background:var(--fail-bg)}
ul.reasons{margin:0;padding-left:18px}
ul.reasons li{color:var(--fail)}
button.copy{margin-top:4px;font-size:12px}
td.cell .codes{font-size:10.5px;font-weight:600;margin-left:3px;opacity:.85}
table.causes{border-collapse:collapse;background:#fff;font-size:13px;margin-bottom:6px}
table.causes th,table.causes td{border:1px solid var(--line);padding:3px 8px;text-align:left;
vertical-align:top}
table.causes td.n{text-align:right;font-variant-numeric:tabular-nums}
table.causes tr.cause th.code{color:var(--fail)}
#failures input{font:inherit;padding:2px 6px;min-width:280px}
[hidden]{display:none!important}
"""

SCRIPT = """
(function(){
  function $(id){return document.getElementById(id);}
  var only=$('only-failures'),tool=$('tool-filter'),bound=$('boundary-filter'),cause=$('cause-filter'),
      search=$('failure-search'),count=$('shown'),fcount=$('failures-shown');
  function has(el,attr,t){return !t||(' '+(el.getAttribute(attr)||'')+' ').indexOf(' '+t+' ')>=0;}
  function num(el,attr){return parseInt(el.getAttribute(attr)||'0',10);}
  function ratio(p,c){return c?p+'/'+c:'\u2013';}
  // The causes of each failing case, read from the failure list (its link names the case).
  var caseCauses={};
  document.querySelectorAll('li.failure').forEach(function(li){
    var a=li.querySelector('a');
    if(a)caseCauses[a.getAttribute('href').slice(1)]=li.getAttribute('data-causes');});
  function rowShown(tr,f,t,b,c){
    if(!has(tr,'data-tools',t))return false;
    if(!f&&!c)return true;
    var ok=false;
    tr.querySelectorAll('td.cell').forEach(function(td){
      if(b&&td.getAttribute('data-col')!==b)return;
      if(f&&num(td,'data-failed')===0)return;
      if(c&&!has(td,'data-causes',c))return;
      ok=true;});
    return ok;
  }
  // Totals follow what is shown: a row's total sums its shown cells, a column's its shown
  // rows, the corner both -- always passed/cases, the one meaning of a count on this page.
  function totals(){
    var cols={},all=[0,0];
    document.querySelectorAll('tr.row').forEach(function(tr){
      var p=0,c=0,fl=0;
      tr.querySelectorAll('td.cell').forEach(function(td){
        if(td.hidden)return;
        var tp=num(td,'data-passed'),tc=num(td,'data-cases');
        p+=tp;c+=tc;fl+=num(td,'data-failed');
        if(!tr.hidden){var k=td.getAttribute('data-col'),s=cols[k]||(cols[k]=[0,0]);s[0]+=tp;s[1]+=tc;}
      });
      var total=tr.querySelector('td.row-total');
      if(total){
        var was=total.getAttribute('data-state'),st=fl?'fail':(was==='fail'?(p?'pass':'not_reached'):was);
        total.textContent=ratio(p,c);total.className='total row-total '+st;}
      if(!tr.hidden){all[0]+=p;all[1]+=c;}
    });
    document.querySelectorAll('#totals td[data-col]').forEach(function(td){
      var s=cols[td.getAttribute('data-col')]||[0,0];td.textContent=ratio(s[0],s[1]);});
    var g=$('grand-total');if(g)g.textContent=ratio(all[0],all[1]);
  }
  function apply(){
    var f=only&&only.checked,t=tool?tool.value:'',b=bound?bound.value:'',c=cause?cause.value:'',
        q=search?search.value.toLowerCase():'';
    document.querySelectorAll('tr.row').forEach(function(tr){tr.hidden=!rowShown(tr,f,t,b,c);});
    document.querySelectorAll('tr.group').forEach(function(g){
      var n=g.nextElementSibling,any=false;
      while(n&&!n.classList.contains('group')){if(!n.hidden)any=true;n=n.nextElementSibling;}
      g.hidden=!any;});
    document.querySelectorAll('table.matrix [data-col]').forEach(function(el){
      el.hidden=!!b&&el.getAttribute('data-col')!==b;});
    totals();
    var shown=0;
    document.querySelectorAll('details.case').forEach(function(d){
      var ok=(!f||d.getAttribute('data-state')==='fail')&&has(d,'data-tools',t)&&
        (!b||d.getAttribute('data-boundary')===b)&&
        (!c||(' '+(caseCauses[d.id]||'')+' ').indexOf(' '+c+' ')>=0);
      d.hidden=!ok;if(ok)shown++;});
    if(count)count.textContent=shown;
    var fshown=0;
    document.querySelectorAll('li.failure').forEach(function(li){
      var ok=has(li,'data-tools',t)&&(!b||li.getAttribute('data-boundary')===b)&&has(li,'data-causes',c)&&
        (!q||li.textContent.toLowerCase().indexOf(q)>=0);
      li.hidden=!ok;if(ok)fshown++;});
    if(fcount)fcount.textContent=fshown;
  }
  function openTarget(){
    var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
    var el=document.getElementById(id);
    if(el&&el.tagName==='DETAILS'){el.hidden=false;el.open=true;el.scrollIntoView({block:'start'});}
  }
  [only,tool,bound,cause].forEach(function(el){if(el)el.addEventListener('change',apply);});
  if(search)search.addEventListener('input',apply);
  document.querySelectorAll('button.cause-only').forEach(function(btn){
    btn.addEventListener('click',function(){
      if(cause){cause.value=btn.getAttribute('data-cause');apply();}
      var m=$('matrix');if(m)m.scrollIntoView({block:'start'});});});
  document.querySelectorAll('button.copy').forEach(function(btn){
    btn.addEventListener('click',function(){
      var text=btn.getAttribute('data-copy');
      if(navigator.clipboard){navigator.clipboard.writeText(text).then(function(){btn.textContent='copied';});}
    });});
  window.addEventListener('hashchange',openTarget);
  apply();openTarget();
})();
"""


def text(value: Any) -> str:
    """Escaped text for the page. ``://`` is broken with a zero-width space: the file must
    hold no URL a browser, a link checker or a mail client would follow or fetch, even
    inside an error message a case recorded (the order API's address, for one)."""
    return html.escape(str(value)).replace("://", ":\u200b//")


def _show(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, Mapping) and set(value) == {"in"}:
        return "one of " + ", ".join(_show(v) for v in value["in"])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " > ".join(value) if value else "(none)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _lives(count: int) -> str:
    return f"{count} life" if count == 1 else f"{count} lives"


def case_anchor(index: int) -> str:
    return f"case-{index}"


def page(title: str, body: str, *, script: str = SCRIPT) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{script}</script>\n</body></html>\n"
    )


def table_box(table: str, *, tall: bool = False) -> str:
    """A table in a box that scrolls sideways (and, ``tall``, down with its header kept in
    sight): a wide matrix never widens the page past the window."""
    return f'<div class="table-box{" tall" if tall else ""}">{table}</div>'


def _legend() -> str:
    items = "".join(
        f'<span><span class="swatch {state}">{MARKS[state]}</span>{_STATE_NAMES[state]}</span>'
        for state in MARKS
    )
    return (
        f'<div class="legend">{items}<span class="dim">a cell holds every case of that crash point '
        f"for the scenario; {text(COUNTS)}; A, B…: the causes of its failures (above); "
        "click a cell for its case</span></div>"
    )


def _controls(tools: Iterable[str], causes: Causes) -> str:
    tool_options = "".join(f'<option value="{text(t)}">{text(t)}</option>' for t in sorted(set(tools)))
    column_options = "".join(f'<option value="{c}">{text(c)}</option>' for c in COLUMNS)
    cause_options = "".join(
        f'<option value="{text(c.key)}">{text(c.code)} {text(c.label)}</option>' for c in causes
    )
    return (
        '<div class="controls">'
        '<label><input type="checkbox" id="only-failures"> failures only</label>'
        '<label>tool <select id="tool-filter"><option value="">all tools</option>'
        f"{tool_options}</select></label>"
        '<label>crash point <select id="boundary-filter"><option value="">all crash points</option>'
        f"{column_options}</select></label>"
        '<label>cause <select id="cause-filter"><option value="">all causes</option>'
        f"{cause_options}</select></label>"
        '<span class="dim"><span id="shown"></span> cases shown below</span></div>'
    )


def _cell(matrix: Matrix, cell: Cell, anchors: Mapping[str, str]) -> str:
    """One cell: its mark, ``passed/cases``, the codes of its causes; the hover says it in
    words with the causes named; data attributes let the script recompute totals."""
    t = cell.tally
    causes = matrix.causes_of(cell)
    label = MARKS[cell.state] + (f" {t.ratio}" if t.cases else "")
    tip = f"{cell.column}: {t.spelled}" if t.cases else f"{cell.column}: no case"
    if cell.state in ("not_reachable", "deselected"):
        tip = f"{cell.column}: {_STATE_NAMES[cell.state]}: {'; '.join(cell.why)}"
    if causes:
        tip += "; causes: " + ", ".join(
            f"{c.code} {c.key} ({sum(case in cell.cases for case in c.cases)})" for c in causes
        )
    named = f' <span class="codes">{text(codes(causes))}</span>' if causes else ""
    focus = cell.focus
    inner = (
        f'<a href="#{anchors[focus.node_id]}" title="{text(tip)}">{text(label)}{named}</a>'
        if focus is not None
        else f'<span title="{text(tip)}">{text(label)}</span>'
    )
    return (
        f'<td class="cell {cell.state}" data-col="{cell.column}" data-passed="{t.passed}" '
        f'data-cases="{t.cases}" data-failed="{t.failed}" '
        f'data-causes="{text(" ".join(c.key for c in causes))}">{inner}</td>'
    )


def matrix_table(matrix: Matrix, anchors: Mapping[str, str]) -> str:
    """The matrix as an HTML table; ``anchors`` maps a case's node id to its detail anchor."""
    head = "".join(f'<th data-col="{c}" title="{c}">{text(LABELS[c])}</th>' for c in COLUMNS)
    rows = []
    for group, members in matrix.groups():
        rows.append(f'<tr class="group"><th colspan="{len(COLUMNS) + 2}">{text(group)}</th></tr>')
        for row in members:
            cells = "".join(_cell(matrix, cell, anchors) for cell in row.cells)
            causes = " ".join(c.key for c in matrix.causes.of(case for c in row.cells for case in c.cases))
            rows.append(
                f'<tr class="row" data-tools="{text(" ".join(row.tools))}" '
                f'data-failing="{1 if row.tally.failed else 0}" data-causes="{text(causes)}">'
                f'<th scope="row" title="{text(row.scenario_path)}">{text(row.label)}</th>{cells}'
                f'<td class="total row-total {row.tally.state}" data-state="{row.tally.state}" '
                f'title="{text(row.tally.spelled)}">{row.tally.ratio}</td></tr>'
            )
    foot = "".join(
        f'<td data-col="{c}" class="total" title="{text(t.spelled)}">{t.ratio if t.cases else "–"}</td>'
        for c, t in zip(COLUMNS, matrix.columns, strict=True)
    )
    return (
        f'<table class="matrix"><thead><tr><th>scenario</th>{head}<th>passed</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody>"
        f'<tfoot><tr id="totals"><th scope="row">total</th>{foot}'
        f'<td class="total" id="grand-total" title="{text(matrix.tally.spelled)}">{matrix.tally.ratio}</td>'
        "</tr></tfoot></table>"
    )


def causes_section(matrix: Matrix, anchors: Mapping[str, str]) -> str:
    """The failures grouped by cause: each with its counts, an example and one case to
    rerun (``reports.causes``); a button shows only the rows and failures of that cause."""
    causes = matrix.causes
    if not len(causes):
        return ""
    rows = "".join(
        f'<tr class="cause {c.kind}" data-cause="{text(c.key)}"><th class="code">{text(c.code)}</th>'
        f"<td><b>{text(c.key)}</b> <span class=dim>{text(c.kind if c.kind != c.key else '')}</span>"
        f'<br><span class="dim">{text(c.detail)}</span></td>'
        f'<td class="n">{len(c.cases)}</td><td class="n">{len(c.scenarios)}</td>'
        f'<td><a href="#{anchors[c.representative.node_id]}"><code>{text(c.representative.title)}</code></a>'
        f"<br><code>{text(c.representative.repro)}</code> "
        f'<button class="copy" type="button" data-copy="{text(c.representative.repro)}">copy</button></td>'
        f'<td><button class="cause-only" type="button" data-cause="{text(c.key)}">show only</button>'
        "</td></tr>"
        for c in causes
    )
    return (
        f'<section id="causes"><h2>Causes ({len(causes)})</h2>'
        '<p class="dim">Invariants first, then expectations; a case counts under each cause it shows. '
        "A cell of the matrix names its causes by code.</p>"
        '<table class="causes"><thead><tr><th></th><th>cause</th><th>cases</th><th>scenarios</th>'
        f"<th>one case to rerun</th><th></th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _failures_section(matrix: Matrix, anchors: Mapping[str, str]) -> str:
    """Every failure, its most important reason first, searchable by any text it shows."""
    failing = matrix.failing
    if not failing:
        return ""
    items = []
    for case in failing:
        codes = [c.code for c in matrix.causes.of((case,))]
        keys = [c.key for c in matrix.causes.of((case,))]
        items.append(
            f'<li class="failure" data-causes="{text(" ".join(keys))}" '
            f'data-tools="{text(" ".join(case.tools))}" data-boundary="{text(case.boundary)}">'
            f'<a href="#{anchors[case.node_id]}"><code>{text(case.title)}</code></a> {text(case.status)}: '
            f'{text(reasons(case)[0])} <span class="dim">[{text(",".join(codes))}]</span></li>'
        )
    return (
        f'<section id="failures"><h2>Failures ({len(failing)})</h2>'
        '<div class="controls"><label>search <input type="search" id="failure-search" '
        'placeholder="scenario, point, invariant, text…"></label>'
        f'<span class="dim"><span id="failures-shown">{len(failing)}</span> shown</span></div>'
        f"<ul>{''.join(items)}</ul></section>"
    )


def not_run_section(matrix: Matrix) -> str:
    """Why cells are not reachable or deselected: one line per reason (``Matrix.no_verdict``)."""
    entries = matrix.no_verdict()
    if not entries:
        return ""
    items = "".join(
        f'<li><span class="swatch {e.state}">{MARKS[e.state]}</span> {text(_STATE_NAMES[e.state])} at '
        + ", ".join(f"<b>{text(LABELS[c])}</b> (<code>{text(c)}</code>)" for c in e.columns)
        + f" in {text(e.where())}: {text(e.why)}</li>"
        for e in entries
    )
    reach = (
        ""
        if matrix.reachable is None
        else f"<p>This agent can be killed at: {text(', '.join(matrix.reachable) or 'nothing')}.</p>"
    )
    return f'<div id="not-run"><h4>Cells with no verdict, and why</h4>{reach}<ul>{items}</ul></div>'


def _eval_cell(row: EvalRow | None, anchors: Mapping[str, str]) -> str:
    """A row's mark and ``passed/cases`` (``scorecard.COUNTS``), its colour its state's; the
    hover says why it is not a pass, or how many passed; the link opens its first failing
    case (else its first case)."""
    if row is None:
        return '<td class="eval-none dim" title="not asked of this class">—</td>'
    label = MARKS[row.state] + (f" {row.ratio}" if row.cases else "")
    tip = f"{_STATE_NAMES[row.state]}: {len(row.passed)} of {len(row.cases)} cases passed it"
    if row.why:
        tip += f"; {row.why}"
    target = row.failing[0] if row.failing else (row.cases[0] if row.cases else None)
    inner = (
        f'<a href="#{anchors[target]}" title="{text(tip)}">{text(label)}</a>'
        if target is not None and target in anchors
        else f'<span title="{text(tip)}">{text(label)}</span>'
    )
    return (
        f'<td class="eval {row.state}" data-eval="{text(row.id)}" data-passed="{len(row.passed)}" '
        f'data-cases="{len(row.cases)}">{inner}</td>'
    )


_EVAL_STATES = ("pass", "fail", "not_applicable", "not_reached")


def scorecard_legend() -> str:
    """What a scorecard cell's colour, mark and count mean (also used by ``--compare``)."""
    items = "".join(
        f'<span><span class="swatch {state}">{MARKS[state]}</span>{_STATE_NAMES[state]}</span>'
        for state in _EVAL_STATES
    )
    return (
        f'<div class="legend" id="scorecard-legend">{items}<span><span class="swatch dim">—</span>'
        f'not asked of this class</span><span class="dim">{text(SCORECARD_COUNTS)}; a crash case '
        "answers the rows of the class of the call it crashed; running an idempotent or conditional "
        "tool again is its contract, so no double effect is asked of non-idempotent calls only</span></div>"
    )


def scorecard_section(card: Scorecard, anchors: Mapping[str, str]) -> str:
    """The named evals: seed 004's list, then the crash evals by crash point and the class
    of the crashed call; each table in a box that scrolls, its "why" wrapped."""
    if not card.rows:
        return ""
    seed = "".join(
        f'<tr><th scope="row">{text(row.title)}</th>{_eval_cell(row, anchors)}'
        f'<td class="why dim">{text(row.why)}</td></tr>'
        for row in card.of_kind("seed004")
    )
    questions = "".join(f"<th>{text(q.title)}</th>" for q in CRASH_QUESTIONS.values())
    crash = "".join(
        f'<tr><th scope="row">{text(LABELS.get(column, column))}</th><td>{text(cls)}</td>'
        + "".join(_eval_cell(row, anchors) for row in rows)
        + "</tr>"
        for column, cls, rows in card.crash_grid()
    )
    failing = "".join(
        f'<tr><th scope="row">{text(row.title)}</th>'
        f'<td class="fail">{text(MARKS["fail"])} {row.ratio}</td><td class="why">{text(row.why)}</td></tr>'
        for row in card.of_kind("crash")
        if row.state == "fail"
    )
    why = (
        table_box(
            '<table class="matrix scorecard" id="scorecard-failing"><thead><tr><th>failing crash eval</th>'
            f"<th>passed</th><th>why</th></tr></thead><tbody>{failing}</tbody></table>"
        )
        if failing
        else ""
    )
    return (
        f'<section id="scorecard"><h2>Scorecard</h2><p>{text(card.summary)}</p>{scorecard_legend()}'
        + table_box(
            '<table class="matrix scorecard" id="scorecard-seed004"><thead><tr><th>eval (seed 004)</th>'
            f"<th>passed</th><th>why</th></tr></thead><tbody>{seed}</tbody></table>"
        )
        + table_box(
            '<table class="matrix scorecard" id="scorecard-crash"><thead><tr><th>crash point</th>'
            f"<th>class of the crashed call</th>{questions}</tr></thead><tbody>{crash}</tbody></table>"
        )
        + why
        + "</section>"
    )


def _moment(moment: Mapping[str, Any]) -> str:
    source = moment.get("source")
    life = moment.get("life")
    lclass = f" l{life}" if isinstance(life, int) and 1 <= life <= 4 else ""
    if source == "life":
        event = moment.get("event")
        if event == "start":
            if life == 1:
                return f'<li class="start{lclass}">▶ life 1 starts</li>'
            return (
                f'<li class="start restart{lclass}">↻ restart: life {life} starts on the same session '
                "and world</li>"
            )
        if event in ("crash", "torn"):
            what = "torn write, then SIGKILL" if event == "torn" else "SIGKILL"
            return f'<li class="crash{lclass}">✗ {what} at {text(moment.get("point", ""))}</li>'
        if event == "exit":
            return f'<li class="exit{lclass}">■ life {life} exits normally</li>'
        if event == "left_running":
            what = f"left running (the harness killed it): {text(moment.get('error', ''))}"
            return f'<li class="crash{lclass}">! life {life} {what}</li>'
        return f'<li class="crash{lclass}">! life {life} {text(event)}: {text(moment.get("error", ""))}</li>'
    if source == "session":
        line = f'<span class="ln">L{moment.get("line")}</span>'
        if moment.get("type") == "tool_execution":
            body = (
                f"ledger {text(moment.get('status'))}  {text(moment.get('tool_call_id'))}"
                f"  exec {text(str(moment.get('execution_id', ''))[:12])}"
            )
        elif moment.get("type") == "message":
            role = moment.get("role")
            if role == "tool":
                body = f"tool result  {text(moment.get('tool_call_id'))}"
            elif moment.get("tool_calls"):
                body = f"{text(role)}: tool call {text(', '.join(moment['tool_calls']))}"
            else:
                body = f"{text(role)} message"
        else:
            body = "compaction"
        return f'<li class="rec{lclass}">{line}{body}</li>'
    if source == "world":
        who = ", ".join(
            str(part)
            for part in (moment.get("tool_call_id"), f"exec {str(moment.get('execution_id') or '')[:12]}")
            if part and part != "exec "
        )
        return (
            f'<li class="world{lclass}"><span class="ln">#{moment.get("seq")}</span>◆ world '
            f"{text(moment.get('kind'))}  {text(moment.get('tool'))}"
            f"{'  (' + text(who) + ')' if who else ''}"
            f"  at session byte {text(moment.get('session_bytes'))}</li>"
        )
    if source == "more":
        return f'<li class="more">… {moment.get("omitted")} moments left out</li>'
    return ""


def _expected_observed(case: CaseRecord) -> str:
    expected = case.expected
    observed = case.observed or {}
    bad = {m["field"] for m in case.mismatches}
    rows = []
    calls: list[str] = []
    for name in ("outcome", "ledger", "code"):
        for source in (expected.get(name) or {}, observed.get(name) or {}):
            calls += [c for c in source if c not in calls]
    for call in calls:
        for name in ("outcome", "ledger", "code"):
            want = (expected.get(name) or {}).get(call)
            got = (observed.get(name) or {}).get(call)
            if want is None and got is None and name == "code":
                continue
            field = f"{name}[{call}]"
            specified = call in (expected.get(name) or {})
            rows.append(
                f'<tr class="{"bad" if field in bad else ""}"><th>{text(field)}</th>'
                f"<td>{text(_show(want)) if specified else '<span class=dim>any</span>'}</td>"
                f"<td>{text(_show(got))}</td></tr>"
            )
    world_want = expected.get("world") or {}
    world_got = observed.get("world") or {}
    for key, want in world_want.items():
        if key in ("files", "rows") and isinstance(want, Mapping):
            for sub, value in want.items():
                got = (
                    (world_got.get("files") or {}).get(sub)
                    if key == "files"
                    else world_got.get(f"rows:{sub}", 0)
                )
                field = f"world.{key}[{sub}]"
                rows.append(
                    f'<tr class="{"bad" if field in bad else ""}"><th>{text(field)}</th>'
                    f"<td>{text(_show(value))}</td><td>{text(_show(got))}</td></tr>"
                )
        else:
            field = f"world.{key}"
            rows.append(
                f'<tr class="{"bad" if field in bad else ""}"><th>{text(field)}</th>'
                f"<td>{text(_show(want))}</td><td>{text(_show(world_got.get(key, 0)))}</td></tr>"
            )
    if not rows:
        return '<p class="dim">nothing observed</p>'
    return f'<table class="eo"><tr><th></th><th>expected</th><th>observed</th></tr>{"".join(rows)}</table>'


def _second_crashes(case: CaseRecord) -> str:
    """A depth-2 case's second crashes, each with its own timeline and rerun line (the
    case's timeline above is the one its verdict came from). Collapsed unless it failed."""
    items = []
    for second in case.recovery_points:
        status = str(second.get("status", ""))
        state = "fail" if status in FAILING else "pass" if status == "passed" else status
        moments = "".join(_moment(m) for m in second.get("timeline") or ())
        reasons = "".join(f"<li>{text(r)}</li>" for r in second.get("reasons") or ())
        body = [f'<ul class="reasons">{reasons}</ul>'] if reasons else []
        if moments:
            body.append(f'<ol class="timeline">{moments}</ol>')
        if second.get("repro"):
            body.append(
                f"<pre><code>{text(second['repro'])}</code></pre>"
                f'<button class="copy" type="button" data-copy="{text(second["repro"])}">copy</button>'
            )
        if second.get("case_dir"):
            body.append(f'<p class="dim">case directory <code>{text(second["case_dir"])}</code></p>')
        items.append(
            f'<details class="second"{" open" if status in FAILING else ""}><summary>'
            f'<span class="badge {text(state)}">{text(status)}</span> second crash at '
            f"<code>{text(second.get('point', ''))}</code></summary>{''.join(body)}</details>"
        )
    if not items:
        return ""
    return f"<h4>Second crashes ({len(items)})</h4>{''.join(items)}"


def _case(case: CaseRecord, anchor: str) -> str:
    state = (
        "fail"
        if case.failing
        else case.status
        if case.status in ("not_reached", "not_reachable", "not_applicable")
        else "indeterminate"
        if case.indeterminate
        else "pass"
    )
    timeline = "".join(_moment(m) for m in case.timeline) or '<li class="more">no timeline recorded</li>'
    parts = [f'<h4>Timeline</h4><ol class="timeline">{timeline}</ol>', _second_crashes(case)]
    right = ["<h4>Expected vs observed</h4>", _expected_observed(case)]
    if not case.passed:
        right.append('<h4>Why it did not pass</h4><ul class="reasons">')
        right += [f"<li>{text(r)}</li>" for r in reasons(case)]
        right.append("</ul>")
    if case.world_diff:
        items = "".join(
            f"<tr><th>{text(d['key'])}</th><td>{text(_show(d['clean']))}</td><td>{text(_show(d['observed']))}</td></tr>"
            for d in case.world_diff
        )
        right.append(
            "<h4>World vs the clean run</h4>"
            '<table class="eo"><tr><th></th><th>clean</th><th>this case</th></tr>'
            f"{items}</table>"
        )
    if case.notes:
        right.append(f'<p class="dim">{text("; ".join(case.notes))}</p>')
    if case.not_applicable:
        right.append(f'<p class="dim">not applicable: {text("; ".join(case.not_applicable))}</p>')
    right.append(
        f"<h4>Rerun</h4><pre><code>{text(case.repro)}</code></pre>"
        f'<button class="copy" type="button" data-copy="{text(case.repro)}">copy</button>'
        f'<p class="dim">node id <code>{text(case.node_id)}</code><br>case directory '
        f"<code>{text(case.case_dir)}</code></p>"
    )
    summary = (
        f'<summary><span class="badge {state}">{text(case.status)}'
        f"{' (indeterminate)' if case.indeterminate and case.passed else ''}</span>"
        f"<code>{text(case.title)}</code>"
        f'<span class="dim">{text(", ".join(case.tools))} · {_lives(case.lives)} · '
        f"{case.seconds:.2f}s</span></summary>"
    )
    return (
        f'<details class="case state-{state}" id="{anchor}" data-state="{state}" '
        f'data-tools="{text(" ".join(case.tools))}" '
        f'data-boundary="{text(case.boundary)}"{" open" if case.failing else ""}>{summary}'
        f'<div class="case-body"><div>{"".join(parts)}</div><div>{"".join(right)}</div></div></details>'
    )


def render_html(results: Results, matrix: Matrix) -> str:
    order = [case for row in matrix.rows for cell in row.cells for case in cell.cases]
    # Anchors follow the results file's order, so a link into the page stays valid when
    # the page is re-rendered (``crashmatrix report``) from the same file.
    anchors = {case.node_id: case_anchor(i) for i, case in enumerate(results.cases)}
    failing = matrix.failing
    headline_class = "bad" if failing else "ok"
    meta = f"agent {results.agent}"
    if results.created:
        meta += f" · {results.created}"
    if results.seconds:
        meta += f" · {results.seconds:.0f}s"
    body = [
        "<header><h1>crashmatrix pass matrix</h1>"
        f'<p class="headline {headline_class}">{text(matrix.headline)}</p>'
        f'<p class="dim">{text(meta)}</p></header>'
    ]
    # Causes and the matrix first: what broke, and where, before any single failure.
    body.append(causes_section(matrix, anchors))
    tools = [t for row in matrix.rows for t in row.tools]
    body.append(
        f'<section id="matrix"><h2>Matrix</h2>{_controls(tools, matrix.causes)}{_legend()}'
        f"{table_box(matrix_table(matrix, anchors), tall=True)}{not_run_section(matrix)}</section>"
    )
    body.append(_failures_section(matrix, anchors))
    body.append(scorecard_section(matrix.scorecard, anchors))
    cases = "".join(_case(case, anchors[case.node_id]) for case in order)
    body.append(f'<section id="cases"><h2>Cases</h2>{cases}</section>')
    return page(f"crashmatrix: {matrix.headline}", "\n".join(body))
