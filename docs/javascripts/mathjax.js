// MathJax for the $...$ and $$...$$ of the tutorial pages (pymdownx.arithmatex, generic mode)
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" }
};
document$.subscribe(() => { MathJax.typesetPromise(); });
