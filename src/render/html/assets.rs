//! The page's style and script, inlined into every report: the file is opened from disk or as a
//! CI artifact, so it loads nothing from anywhere.

pub(super) const STYLE: &str = r#"
:root { --fg: #1f2328; --dim: #59636e; --line: #d1d9e0; --bg: #ffffff; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
  color: var(--fg); background: var(--bg); margin: 0 auto; padding: 16px 24px; max-width: 1240px; }
h1 { font-size: 22px; margin: 4px 0 8px; }
h2 { font-size: 18px; margin: 28px 0 6px; padding-top: 10px; border-top: 2px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.summary { font-size: 15px; padding: 8px 12px; background: var(--soft); border-left: 4px solid #8c959f; margin: 8px 0; }
.summary.bad { border-left-color: #cf222e; }
.summary.good { border-left-color: #1a7f37; }
.dim { color: var(--dim); }
pre.diff { background: var(--soft); padding: 8px 10px; overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; max-height: 300px; }
pre.diff .add { color: #116329; } pre.diff .rem { color: #a40e26; } pre.diff .chg { color: #7d4e00; }
pre.diff .head { font-weight: 600; }
.heatwrap { display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }
table.heat { border-collapse: separate; border-spacing: 2px; }
table.heat th { font-weight: 500; font-size: 11.5px; color: var(--dim); padding: 0 3px; white-space: nowrap; }
table.heat thead th { vertical-align: bottom; height: 64px; }
table.heat thead th span { display: inline-block; transform: rotate(-50deg); transform-origin: left bottom; width: 26px; margin-left: 14px; }
table.heat tbody th { text-align: right; font-family: ui-monospace, Menlo, Consolas, monospace; }
table.heat td { width: 26px; height: 18px; border-radius: 3px; font-size: 10px; text-align: center; cursor: pointer; color: #1f2328; }
table.heat td.none { background: transparent; cursor: default; }
table.heat td.same { background: #e6f2e8; color: #6b8f71; }
table.heat td.inf { background: #3b0a45; color: #fff; }
table.heat td.bytes { background: #8c959f; color: #fff; }
table.heat td.nc { background: repeating-linear-gradient(45deg, #d8dee4 0 3px, #ffffff 3px 6px); color: #59636e; }
table.heat td.mixed { box-shadow: inset 0 0 0 2px #59636e; }
table.heat td.sel { outline: 2px solid #0969da; outline-offset: 1px; }
.legend { font-size: 12px; color: var(--dim); }
.legend .sw { display: inline-block; width: 18px; height: 12px; border-radius: 2px; vertical-align: middle; margin: 0 4px 0 0; }
.legend .mark { display: inline-block; margin: 2px 12px 2px 0; white-space: nowrap; }
.heatside { max-width: 460px; }
.info { min-width: 320px; max-width: 100%; background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; white-space: pre-wrap; }
table.changes { border-collapse: collapse; width: 100%; }
table.groups { border-collapse: collapse; margin: 8px 0; }
table.groups th, table.groups td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: right; white-space: nowrap; }
table.groups th.name { text-align: left; }
table.groups tr.bad th { border-left: 4px solid #cf222e; }
table.groups tr.good th { border-left: 4px solid #1a7f37; }
table.changes th, table.changes td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: right; white-space: nowrap; }
table.changes th { background: var(--soft); cursor: pointer; user-select: none; position: sticky; top: 0; }
table.changes th.sorted-asc::after { content: " ▲"; } table.changes th.sorted-desc::after { content: " ▼"; }
table.changes td.name, table.changes th.name, table.changes td.kind, table.changes th.kind { text-align: left; }
table.changes td.name { white-space: normal; word-break: break-all; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
table.changes tr.suspect td { background: #ffebe9; }
table.files td, table.files th { white-space: normal; text-align: left; vertical-align: top; }
table.files td.name { word-break: normal; white-space: nowrap; }
h1 code, h2 code { font-size: 0.85em; }
table.changes td .bar { display: inline-block; height: 9px; border-radius: 2px; vertical-align: middle; margin-right: 6px; }
.scroll { max-height: 640px; overflow: auto; border: 1px solid var(--line); border-radius: 6px; }
ul.plain { margin: 4px 0; padding-left: 20px; }
ul.plain li { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
nav.toc a { margin-right: 14px; }
footer { margin-top: 32px; color: var(--dim); font-size: 12px; }
"#;

/// Sorting of the changed-tensor tables and the details of a clicked heatmap cell. Text goes
/// into the page through `textContent` only: nothing a model file holds becomes markup.
pub(super) const SCRIPT: &str = r"
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-v');
    if (v === null) return cell.textContent;
    return v === 'inf' ? Infinity : parseFloat(v);
  }
  // A sort shows in the address (#sort=COLUMN-asc|desc), so a sorted view can be linked to
  // and opens sorted.
  var wanted = /^#sort=(\d+)-(asc|desc)$/.exec(location.hash);
  document.querySelectorAll('table.changes').forEach(function (table) {
    var heads = table.querySelectorAll('thead th');
    function sortBy(col, asc) {
      var th = heads[col];
      heads.forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a.cells[col]), y = key(b.cells[col]);
        var order = (typeof x === 'number' && typeof y === 'number')
          ? (x === y ? 0 : (x < y ? -1 : 1))
          : String(x).localeCompare(String(y));
        return asc ? order : -order;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    heads.forEach(function (th, col) {
      th.addEventListener('click', function () {
        var asc = !th.classList.contains('sorted-asc');
        sortBy(col, asc);
        history.replaceState(null, '', '#sort=' + col + '-' + (asc ? 'asc' : 'desc'));
      });
    });
    if (wanted && Number(wanted[1]) < heads.length) sortBy(Number(wanted[1]), wanted[2] === 'asc');
  });
  document.querySelectorAll('table.heat').forEach(function (heat) {
    var info = document.getElementById(heat.getAttribute('data-info'));
    heat.addEventListener('click', function (event) {
      var cell = event.target.closest('td[data-cell]');
      if (!cell || !info) return;
      heat.querySelectorAll('td.sel').forEach(function (c) { c.classList.remove('sel'); });
      cell.classList.add('sel');
      info.textContent = cell.getAttribute('title');
    });
  });
  // Read by the tests: the script ran to its end.
  document.documentElement.setAttribute('data-ready', '1');
})();
";
