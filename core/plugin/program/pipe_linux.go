package program

import (
	"os"
	"syscall"
)

// outputPipe is a pipe whose read end the runtime's poller watches and
// whose write end, which only the program uses, stays blocking: os.Pipe
// makes both ends non-blocking and registers both with the poller, and a
// spawner handing the write end over then makes it blocking again (four
// fcntls and two epoll registrations a pipe for nothing).
func outputPipe() (r, w *os.File, err error) { return pipe(0) }

// inputPipe is the reverse, for a program's stdin: the write end polled,
// the read end (the program's) blocking.
func inputPipe() (r, w *os.File, err error) { return pipe(1) }

// pipe makes a pipe with only end polled (0 the read end, 1 the write end).
func pipe(polled int) (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := syscall.SetNonblock(p[1-polled], false); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}
