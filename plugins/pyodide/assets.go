package pyodide

import (
	"embed"
	"fmt"
	"io/fs"
)

// assets embeds whatever `make wasm` left in wasm/assets. The directory always
// holds a committed README.md, so this compiles in a fresh checkout; the
// binaries are then simply absent and embeddedAsset reports it at run time.
//
//go:embed wasm/assets
var assets embed.FS

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
