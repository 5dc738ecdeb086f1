package client

import (
	"os"
)

// A long-lived host (serve, the daemon) keeps a plugin process for hours.
// When the plugin binary is rebuilt or upgraded in place under it, `rlm
// plugins` shows the new one while the old process goes on serving the
// old code: nothing says so, and a fix that "did not work" costs an
// afternoon. So the supervisor remembers the binary it launched and, on
// each Get, compares it with what is on disk now (one stat, about a
// microsecond); a changed binary retires the old process and launches the
// new one, and the log says why.

// binaryStamp identifies the plugin binary a runtime was launched from.
type binaryStamp struct {
	path string
	info os.FileInfo
}

// stampOf records rt's binary; nil when rt has none (a daemon connection,
// an in-process fake) or it cannot be read.
func stampOf(rt *Runtime) *binaryStamp {
	if rt == nil || rt.Plugin == "" {
		return nil
	}
	fi, err := os.Stat(rt.Plugin)
	if err != nil {
		return nil
	}
	return &binaryStamp{path: rt.Plugin, info: fi}
}

// changed reports whether the binary on disk is no longer the one
// launched: replaced (another file now at the path: go build, cp, a
// package upgrade), rewritten in place (size or modification time), or
// removed. A binary that cannot be read now counts as changed only when it
// is gone: its launch will say what is wrong.
func (b *binaryStamp) changed() bool {
	if b == nil {
		return false
	}
	fi, err := os.Stat(b.path)
	if err != nil {
		return os.IsNotExist(err)
	}
	return !os.SameFile(fi, b.info) || fi.Size() != b.info.Size() || !fi.ModTime().Equal(b.info.ModTime())
}
