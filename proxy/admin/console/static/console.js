// Callout Proxy ops console: live updates. A page whose <main> has
// data-refresh="N" is re-read every N seconds (while the tab is visible)
// and each of its [data-live] regions is swapped for the fresh copy with
// the same id. The server renders and escapes everything; this script only
// moves server-rendered nodes. Without JavaScript the page is read as
// served, with a Reload link.
(function () {
  'use strict';
  // Bulk selection: a "select every row" box (hidden without JavaScript)
  // ticks the page's row boxes; ticked rows survive the live swaps below.
  function wireSelectAll() {
    var all = document.querySelector('input[data-select-all]');
    if (!all) { return; }
    all.hidden = false;
    all.addEventListener('change', function () {
      var boxes = document.querySelectorAll('input[type=checkbox][name=id]');
      for (var i = 0; i < boxes.length; i++) { boxes[i].checked = all.checked; }
    });
  }
  wireSelectAll();

  var main = document.querySelector('main[data-refresh]');
  if (!main) { return; }
  var every = parseInt(main.getAttribute('data-refresh'), 10);
  if (!(every > 0)) { return; }
  var status = document.querySelector('[data-live-status]');
  var stopped = false;

  function say(text, stale) {
    if (!status) { return; }
    status.textContent = text;
    status.parentNode.classList.toggle('stale', !!stale);
  }

  function swap(fresh) {
    var ticked = {};
    var boxes = document.querySelectorAll('input[type=checkbox][name=id]:checked');
    for (var b = 0; b < boxes.length; b++) { ticked[boxes[b].value] = true; }
    var regions = document.querySelectorAll('[data-live]');
    for (var i = 0; i < regions.length; i++) {
      var id = regions[i].id;
      var next = id && fresh.getElementById(id);
      if (next) { regions[i].replaceWith(document.importNode(next, true)); }
    }
    var again = document.querySelectorAll('input[type=checkbox][name=id]');
    for (var k = 0; k < again.length; k++) { if (ticked[again[k].value]) { again[k].checked = true; } }
    wireSelectAll();
    var freshMain = fresh.querySelector('main');
    if (!freshMain || !freshMain.hasAttribute('data-refresh')) { stopped = true; }
  }

  function tick() {
    if (stopped) { return; }
    if (document.hidden) { setTimeout(tick, every * 1000); return; }
    fetch(window.location.href, { credentials: 'same-origin', redirect: 'manual', cache: 'no-store' })
      .then(function (res) {
        if (res.type === 'opaqueredirect' || res.status === 401) {
          stopped = true;
          say('Your session has ended: reload to log in again.', true);
          return null;
        }
        if (!res.ok) { throw new Error('HTTP ' + res.status); }
        return res.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        swap(new DOMParser().parseFromString(html, 'text/html'));
        say('Updated ' + new Date().toISOString().replace('T', ' ').replace(/\..*/, ' UTC') + (stopped ? '; final.' : '.'));
      })
      .catch(function (err) { say('Update failed (' + err.message + '); retrying.', true); })
      .then(function () { if (!stopped) { setTimeout(tick, every * 1000); } });
  }
  setTimeout(tick, every * 1000);
})();
