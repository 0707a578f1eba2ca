package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// interactive reports whether a person is there to answer: standard input
// and standard error are terminals.
func interactive(s ioStreams) bool {
	in, ok := s.In.(*os.File)
	return ok && in != nil && term.IsTerminal(int(in.Fd())) && isTerminal(s.Err)
}

// confirm asks question on w and reports whether the answer read from r is
// yes; anything else, an empty line or end of input, is no.
func confirm(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprint(w, question)
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}
