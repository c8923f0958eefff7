package main

import (
	"fmt"
	"io"
	"os"

	"github.com/rdmabench/rdmabench/auth"
)

// tokenEnv is the environment variable that holds the token when
// --token-file is not given.
const tokenEnv = "RDMABENCH_TOKEN"

// loadToken reads the control connection's token from --token-file, or else
// from RDMABENCH_TOKEN; nil when neither is set. A token file others may
// read is used, with a warning: the token is only as secret as the file.
func loadToken(file string, stderr io.Writer) ([]byte, error) {
	token, err := auth.Load(file, os.Getenv(tokenEnv))
	if err != nil {
		return nil, err
	}
	if file != "" {
		if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(stderr, "rdmabench: warning: token file %s is readable by others (mode %04o); chmod 600 it\n", file, st.Mode().Perm())
		}
	}
	if token != nil && len(token) == 0 { // RDMABENCH_TOKEN of white space only
		return nil, fmt.Errorf("%s is empty", tokenEnv)
	}
	return token, nil
}
