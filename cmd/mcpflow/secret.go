//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// askSecret asks question on w and reads one line from the terminal in,
// without echo. Echo goes off before the question is printed, so an answer
// typed (or pasted) ahead of it is not shown either, and comes back on
// however the read ends: a line, end of input, an error, or ctx cancelled
// (the first Ctrl-C), so the terminal is never left silent.
func askSecret(ctx context.Context, in *os.File, w io.Writer, question string) ([]byte, error) {
	fd := int(in.Fd())
	saved, err := unix.IoctlGetTermios(fd, getTermios)
	if err != nil {
		return nil, err
	}
	quiet := *saved
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, setTermios, &quiet); err != nil {
		return nil, err
	}
	defer unix.IoctlSetTermios(fd, setTermios, saved)
	fmt.Fprint(w, question)
	defer fmt.Fprintln(w) // the Enter typed was not echoed either
	var line []byte
	for {
		ready, err := readable(ctx, fd)
		if err != nil {
			return nil, err
		}
		if !ready {
			continue
		}
		var b [1]byte
		n, err := unix.Read(fd, b[:])
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return nil, err
		case n == 0 || b[0] == '\n':
			return line, nil
		case b[0] != '\r':
			line = append(line, b[0])
		}
	}
}

// readable waits up to a fifth of a second for fd to have input, and
// returns ctx's error once it is cancelled.
func readable(ctx context.Context, fd int) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 200)
	if errors.Is(err, unix.EINTR) {
		return false, nil
	}
	return n > 0, err
}
