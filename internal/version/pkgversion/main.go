// Command pkgversion prints a version from `rdmabench version` as a .deb
// and .rpm version (version.Package), for make's package targets.
package main

import (
	"fmt"
	"os"

	"github.com/rdmabench/rdmabench/internal/version"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pkgversion VERSION")
		os.Exit(2)
	}
	v, err := version.Package(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkgversion:", err)
		os.Exit(1)
	}
	fmt.Println(v)
}
