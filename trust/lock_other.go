//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package trust

import (
	"os"
	"sync"
)

// lockMu serializes trust store writers within this process. Other
// processes are not excluded on this platform (see the package Caveats).
var lockMu sync.Mutex

func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	lockMu.Lock()
	return func() {
		lockMu.Unlock()
		f.Close()
	}, nil
}
