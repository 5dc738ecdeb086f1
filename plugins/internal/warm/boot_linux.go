package warm

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ForkServerSourceFD is the descriptor a fork server started with
// ForkServerArgv reads its source from: the one after its channel (fd 3).
const ForkServerSourceFD = 4

// bootPy starts a fork server whose source is on ForkServerSourceFD. A
// throwaway child reads and compiles it and hands back the code object,
// marshalled; the server runs that. Parsing 30 KB of Python leaves about
// 1.2 MB of the parser's memory resident in the heap (live or too
// fragmented to give back), and every page of it would be copied at each
// fork and freed at each child's exit: compiled elsewhere, a fork server
// holds 7.7 MB of anonymous memory instead of 9.0, and a fork and exit
// take ~6 % less (BENCHMARKS.md). The source is not in argv either: the
// interpreter keeps two copies of its command line for good.
var bootPy = `import marshal, os
def _rlm_read(fd):
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            os.close(fd)
            return b"".join(chunks)
        chunks.append(b)
def _rlm_boot(fd):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            data = marshal.dumps(compile(_rlm_read(fd), "<rlm fork server>", "exec"))
            while data:
                data = data[os.write(w, data):]
        except BaseException as e:
            os.write(2, ("rlm fork server: cannot compile its source: %r\n" % (e,)).encode())
            os._exit(1)
        os._exit(0)
    os.close(fd)
    os.close(w)
    code = _rlm_read(r)
    if os.waitpid(pid, 0)[1] != 0:
        raise SystemExit(1)
    return marshal.loads(code)
exec(_rlm_boot(` + strconv.Itoa(ForkServerSourceFD) + `))
`

// ForkServerArgv is the command line of a fork server run by python: its
// bootstrap, then args as sys.argv[1:]. Its source goes on descriptor
// ForkServerSourceFD (ForkServerSource).
func ForkServerArgv(python string, args ...string) []string {
	return append([]string{python, "-c", bootPy}, args...)
}

// ForkServerSource is the read end of a pipe that holds src whole, its
// write end closed: the fork server's ForkServerSourceFD. Like a command
// line, and unlike a file, it leaves nothing behind when the plugin is
// killed.
func ForkServerSource(src string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	// The pipe must hold all of it, as nobody reads before the server
	// starts: a write that did not fit would wait for ever. Its size is
	// set, not assumed to be the default 64 KiB: a user past
	// pipe-user-pages-soft gets pipes of one page. (Fd makes w blocking,
	// which a write that fits never does.)
	got, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, len(src))
	if err != nil || got < len(src) {
		r.Close()
		return nil, fmt.Errorf("python fork server: a pipe cannot hold the fork server's %d-byte source (%v): see /proc/sys/fs/pipe-max-size and pipe-user-pages-soft", len(src), err)
	}
	if _, err := w.WriteString(src); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
