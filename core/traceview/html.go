package traceview

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
)

// The page's style and script, inlined into every page. They are plain
// files so that they can be read, linted and edited as what they are.
var (
	//go:embed viewer.css
	viewerCSS string
	//go:embed viewer.js
	viewerJS string
)

// csp forbids every load: the page is its own file and nothing else. Even
// a trace holding markup (a model that printed <img src=http://…>) cannot
// make the browser fetch anything; the script renders text as text anyway.
const csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

// Write writes p as one self-contained HTML page.
//
// # Notes
//
// The data goes into a <script type="application/json"> element: Go's
// JSON encoder escapes <, > and & (and U+2028/2029), so no text in a trace
// can close the element or be read as markup.
func Write(w io.Writer, p *Page) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.WriteString(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="` + csp + `">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rlm trace view">
<title>`)
	bw.WriteString(html.EscapeString("rlm · " + p.Title))
	bw.WriteString("</title>\n<style>\n")
	bw.WriteString(viewerCSS)
	bw.WriteString("</style>\n</head>\n<body>\n<noscript>This page shows an rlm trace and needs JavaScript.</noscript>\n<div id=\"app\"></div>\n<script type=\"application/json\" id=\"trace-data\">")
	enc := json.NewEncoder(bw)
	if err := enc.Encode(p); err != nil {
		return err
	}
	bw.WriteString("</script>\n<script>\n")
	bw.WriteString(viewerJS)
	bw.WriteString("</script>\n</body>\n</html>\n")
	return bw.Flush()
}

// WriteFile writes the page to path through a temporary file beside it,
// so that a failed write never leaves half a page (or clobbers a good one).
func WriteFile(path string, p *Page) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot write the page: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, p); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write the page %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write the page %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; a page is as readable as any file.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("cannot write the page %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write the page: %w", err)
	}
	return nil
}
