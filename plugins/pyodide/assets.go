package pyodide

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
)

// assets embeds whatever `make wasm` left in wasm/assets. The directory always
// holds a committed README.md, so this compiles in a fresh checkout; the
// binaries are then simply absent and embeddedAsset reports it at run time.
//
//go:embed wasm/assets
var assets embed.FS

// embeddedReaderAt serves an embedded asset in place, without the copy
// embeddedAsset makes: the stdlib zip is read a file at a time, so copying
// all of it (7.6 MB with its sources and tzdata) would only grow the heap.
func embeddedReaderAt(name string) (io.ReaderAt, int64, error) {
	f, err := assets.Open("wasm/assets/" + name)
	if err != nil {
		return nil, 0, fmt.Errorf("embedded %s: %w", name, fs.ErrNotExist)
	}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil, 0, fmt.Errorf("embedded %s is empty: %w", name, fs.ErrNotExist)
	}
	ra, ok := f.(io.ReaderAt) // documented for embed.FS files
	if !ok {
		return nil, 0, fmt.Errorf("embedded %s is not an io.ReaderAt", name)
	}
	return ra, st.Size(), nil
}

func embeddedAsset(name string) ([]byte, error) {
	b, err := fs.ReadFile(assets, "wasm/assets/"+name)
	if err != nil {
		return nil, fmt.Errorf("embedded %s: %w", name, fs.ErrNotExist)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("embedded %s is empty: %w", name, fs.ErrNotExist)
	}
	return b, nil
}

// HasEmbeddedAssets reports whether python.wasm and its standard library were
// embedded when this binary was built.
func HasEmbeddedAssets() bool {
	_, err1 := fs.Stat(assets, "wasm/assets/python.wasm")
	_, err2 := fs.Stat(assets, "wasm/assets/python311.zip")
	return err1 == nil && err2 == nil
}
