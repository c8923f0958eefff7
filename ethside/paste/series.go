package paste

import "github.com/rdmabench/rdmabench/ethside"

// Series is pastes of the same interfaces saved at successive times, one
// directory each (doctor --pastes DIR --pastes-later DIR2): the first Read
// gives the first directory, each later Read the next, the last again
// after them, as a live reader reads the kernel again under --watch. The
// time between the saves is the caller's to say (--watch); reading them
// needs no wait.
type Series struct {
	Dirs  []string
	reads int
}

// Read reads the next directory of the series; see Read.
func (s *Series) Read() ([]ethside.Iface, error) {
	d := s.Dirs[min(s.reads, len(s.Dirs)-1)]
	s.reads++
	return Read(d)
}

// Saved says the readings are saved ones: a second Read gives the later
// save whether or not the caller waits.
func (s *Series) Saved() bool { return true }

var _ ethside.SavedReader = (*Series)(nil)
