// A search for a flag such as `--sbom`: lunr, the theme's search engine, reads a leading "-" as "must
// not contain", so "--sbom" is an invalid query and finds nothing. The query's leading run of dashes
// is dropped on its way to the search worker (the theme's message type 2 is a query), so it finds
// the word; the search box keeps what was typed. tests/test_docs_browser.py searches for --sbom.
(() => {
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message, ...rest) {
    if (message && message.type === 2 && typeof message.data === "string") {
      message = { ...message, data: message.data.replace(/(^|\s)-{2,}(?=\S)/g, "$1") };
    }
    return post.call(this, message, ...rest);
  };
})();
