//! What every report carries besides its drawing: its style, its legend, and its script.

/// The report's style sheet.
pub(super) const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:16px;color:#111}\
h1{font-size:20px}.verdict{font-weight:bold;font-size:16px}.clean{color:#15803d}\
.dirty{color:#b91c1c}table.summary{border-collapse:collapse;margin:8px 0 16px}\
table.summary th{text-align:left;padding:2px 12px 2px 0;font-weight:normal;color:#555}\
table.summary td{padding:2px 0;font-variant-numeric:tabular-nums}\
svg{display:block;border:1px solid #ddd;background:#fff}\
.row{fill:#fff}.row.alt{fill:#f3f4f6}.label,.time,.note{font-size:11px;fill:#444}\
.time{text-anchor:middle}.tick{stroke:#e5e7eb}\
.hold{fill:#3b82f6}.hold.bad{stroke:#dc2626;stroke-width:2}.token{font-size:10px;fill:#fff;pointer-events:none}\
.pause{fill:#9ca3af;fill-opacity:.35}.link{fill:#a855f7;fill-opacity:.2}.server{fill:#0ea5e9;fill-opacity:.15}.clock{fill:#eab308;fill-opacity:.25}.kill{stroke:#111;stroke-width:2}.strike{stroke:#ea580c;stroke-width:2;stroke-dasharray:4 2}\
.renew{stroke:#16a34a;stroke-width:1.5}.atrisk{fill:#f59e0b}.lost{fill:#dc2626;font-size:13px}\
.write{fill:#1e3a8a}.refused{fill:none;stroke:#dc2626;stroke-width:1.5}\
.mark{fill:none;stroke:#dc2626;stroke-width:2}.band{fill:#dc2626;fill-opacity:.18}.focus{stroke:#f0f;stroke-width:4}\
:target{stroke:#f0f;stroke-width:4}li.violation{margin:4px 0}li.picked{background:#fde68a}\
.legend span{margin-right:14px}.events a{margin-left:4px}";

/// The legend under the timeline.
pub(super) const LEGEND: &str = "<p class=\"legend\"><span style=\"color:#3b82f6\">■ hold (token)</span>\
<span style=\"color:#dc2626\">□ hold a violation names</span><span style=\"color:#16a34a\">| renewal</span>\
<span style=\"color:#f59e0b\">▲ at risk</span><span style=\"color:#dc2626\">✕ lost</span>\
<span style=\"color:#9ca3af\">■ paused</span><span style=\"color:#a855f7\">■ link cut or black-holed</span><span style=\"color:#0ea5e9\">■ server paused or restarting, or a RedLock master out of reach</span><span style=\"color:#ea580c\">┆ RedLock master struck</span><span style=\"color:#eab308\">■ wall clock ahead</span><span>| killed</span>\
<span style=\"color:#dc2626\">○ stale write refused, or an event a violation names</span>\
<span style=\"color:#f87171\">▮ while a violation went on</span></p>";

/// Picks a violation when its list item is clicked, or when the page is opened at it
/// (`report.html#v3`): its list item, its band and its events' marks stand out, the band
/// in view.
pub(super) const SCRIPT: &str = "function pick(li){\
document.querySelectorAll('.focus').forEach(function(e){e.classList.remove('focus')});\
document.querySelectorAll('li.picked').forEach(function(e){e.classList.remove('picked')});\
li.classList.add('picked');var first=document.getElementById('b'+li.id.slice(1));\
if(first){first.classList.add('focus');}\
li.dataset.events.split(' ').forEach(function(i){var e=document.getElementById('e'+i);\
if(e){e.classList.add('focus');first=first||e;}});\
if(first){first.scrollIntoView({block:'center'});}}\
document.querySelectorAll('li.violation').forEach(function(li){\
li.addEventListener('click',function(){pick(li);});});\
var opened=/^#v[0-9]+$/.test(location.hash)&&document.getElementById(location.hash.slice(1));\
if(opened){pick(opened);}";
