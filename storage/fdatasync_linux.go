package storage

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the size, when it grew) but not its
// other metadata, as bbolt does for its own file.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
