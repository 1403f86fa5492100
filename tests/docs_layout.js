// What a reader would see cut off, at the window's width (tests/test_docs_browser.py). Returns a list
// of problems, each naming the element. `desktop`: a table must fit the column without scrolling.
// `legiblePx`: the smallest text a picture may show (docsgen/pictures.py's LEGIBLE_PX).
(desktop, legiblePx) => {
  const problems = [];
  const root = document.documentElement;
  const width = root.clientWidth;
  const name = (el) => {
    const text = (el.innerText || el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60);
    return `${el.tagName.toLowerCase()}${el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : ""} "${text}"`;
  };
  if (root.scrollWidth > width + 1) {
    const wide = [...document.querySelectorAll("body *")].filter((el) => {
      const box = el.getBoundingClientRect();
      return box.width > 0 && box.right > width + 1 && el.children.length === 0;
    }).slice(0, 3).map(name);
    problems.push(`the page is ${root.scrollWidth}px wide in a ${width}px window: ${wide.join("; ")}`);
  }
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  for (const table of document.querySelectorAll(".md-content table")) {
    const box = [table, table.parentElement, table.parentElement && table.parentElement.parentElement]
      .find((el) => el && scrolls(el) && el.scrollWidth > el.clientWidth + 1);
    if (!box) continue;
    const head = name(table.querySelector("th, td") || table);
    if (desktop) {
      problems.push(`a table scrolls sideways at ${width}px (${box.scrollWidth}px in ${box.clientWidth}px): ${head}`);
    } else {
      // Scrolled to its far end, the first column must still be in the box, at its left edge.
      const first = table.querySelector("tbody tr > :first-child");
      if (!first) continue;
      const left = box.getBoundingClientRect().left;
      box.scrollLeft = box.scrollWidth;
      const shown = first.getBoundingClientRect().left;
      box.scrollLeft = 0;
      if (shown < left - 1) problems.push(`a table scrolls its first column out of view: ${head}`);
    }
  }
  // Anything cut at the right edge of a box that hides its overflow (no scroll bar to reach it).
  for (const el of document.querySelectorAll(".md-content *")) {
    const style = getComputedStyle(el);
    if (!["hidden", "clip"].includes(style.overflowX) || el.scrollWidth <= el.clientWidth + 1) continue;
    if (el.closest(".md-clipboard, .headerlink, .md-nav, .md-sidebar, .tabbed-labels")) continue;
    problems.push(`cut off at ${el.clientWidth}px (${el.scrollWidth}px of content): ${name(el)}`);
  }
  // Anything that runs out of the text column (over the sidebar, or off a phone's screen), unless it
  // is inside a box that scrolls.
  const column = document.querySelector(".md-content");
  if (column) {
    const edge = column.getBoundingClientRect().right;
    const spilled = [...column.querySelectorAll("*")].filter((el) => {
      const box = el.getBoundingClientRect();
      if (box.width === 0 || box.right <= edge + 1) return false;
      for (let up = el.parentElement; up && up !== column; up = up.parentElement) if (scrolls(up)) return false;
      return true;
    });
    // Name the outermost: its children spill with it.
    const outermost = spilled.filter((el) => !spilled.includes(el.parentElement)).slice(0, 3);
    if (outermost.length)
      problems.push(`runs out of the text column by ${Math.round(outermost[0].getBoundingClientRect().right - edge)}px: ${outermost.map(name).join("; ")}`);
  }
  // A synopsis or command line that runs past its box instead of wrapping.
  for (const el of document.querySelectorAll(".md-content p.synopsis code")) {
    if (el.scrollWidth > el.clientWidth + 1) problems.push(`a synopsis does not wrap: ${name(el)}`);
  }
  // Inline code that a line ends inside of, right after a hyphen ("bundle build -" / "-standin"): the
  // hyphen's box and the next character's on different lines. A word of more than 24 characters
  // (docsgen/nobreak.py's WHOLE) may break at a hyphen inside it, never in or right after its leading
  // dashes.
  const split = [];
  for (const code of document.querySelectorAll(".md-content code")) {
    if (code.closest("pre")) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const at = [];  // each character of the span's text: its text node and offset
    for (let node = walker.nextNode(); node; node = walker.nextNode())
      for (let k = 0; k < node.textContent.length; k++) at.push([node, k]);
    const text = code.textContent;
    const box = (i) => {
      const range = document.createRange();
      range.setStart(at[i][0], at[i][1]); range.setEnd(at[i][0], at[i][1] + 1);
      return range.getBoundingClientRect();
    };
    for (let i = text.indexOf("-"); i >= 0 && i < text.length - 1; i = text.indexOf("-", i + 1)) {
      if (/\s/.test(text[i + 1])) continue;
      const start = text.slice(0, i).search(/[^\s\/]*$/);
      const rest = text.slice(i).search(/[\s\/]/);
      const word = text.slice(start, rest < 0 ? text.length : i + rest);
      const lead = word.match(/^-*[^-]*/)[0].length;
      if (word.length > 24 && i - start >= lead) continue;
      const hyphen = box(i), next = box(i + 1);
      if (hyphen.width > 0 && next.top > hyphen.top + hyphen.height / 2) split.push(name(code));
    }
  }
  if (split.length) problems.push(`inline code broken after a hyphen (${split.length}): ${[...new Set(split)].slice(0, 3).join("; ")}`);
  // A picture's text too small to read once the picture is scaled to the window, or cut short ("...")
  // or unfinished: a comma and a space where the line ends (a bench plot's title with an empty date;
  // a wrapped line of a picture ends at its comma, with no space after it).
  for (const t of document.querySelectorAll(".md-content svg text")) {
    if (t.getBoundingClientRect().width === 0) continue;
    const size = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
    const label = t.textContent;
    if (size < legiblePx - 0.05) problems.push(`picture text at ${size.toFixed(1)}px (under ${legiblePx}px): "${label.slice(0, 40)}"`);
    if (/(\u2026|\.\.\.|, +)$/.test(label)) problems.push(`picture text cut or unfinished: "${label.slice(0, 60)}"`);
  }
  // The copy button over the code's first line.
  for (const button of document.querySelectorAll(".md-content pre > .md-code__nav")) {
    const code = button.closest("pre").querySelector("code");
    if (!code) continue;
    const b = button.getBoundingClientRect();
    const range = document.createRange();
    range.selectNodeContents(code);
    const hit = [...range.getClientRects()].find((r) => r.width > 0 && r.right > b.left && r.left < b.right &&
                                                   r.bottom > b.top && r.top < b.bottom);
    if (hit) problems.push(`the copy button covers code: ${name(code)}`);
  }
  return problems;
}
