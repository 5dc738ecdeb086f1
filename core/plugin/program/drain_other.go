//go:build !unix

package program

import "os"

// takeBuffered is a no-op here: the native runtime plugins, which run
// programs through this package, are built for Linux only.
func takeBuffered(r *os.File, b []byte, keep func([]byte)) {}
