package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/auth"
)

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode) // past the umask
		return p
	}
	tests := []struct {
		name, file, env string
		want            string // the token; "" with wantErr "" : none
		wantErr, warn   string
	}{
		{"file, trimmed", file("ok", " s3cret\n", 0o600), "", "s3cret", "", ""},
		{"file beats the environment", file("ok2", "fromfile", 0o600), "fromenv", "fromfile", "", ""},
		{"environment", "", " fromenv ", "fromenv", "", ""},
		{"neither", "", "", "", "", ""},
		{"readable by others", file("loose", "s3cret", 0o644), "", "s3cret", "", "readable by others (mode 0644); chmod 600"},
		{"empty file", file("empty", "", 0o600), "", "", "is empty", ""},
		{"white space file", file("blank", " \n\t\n", 0o600), "", "", "is empty", ""},
		{"white space environment", "", " \n", "", "RDMABENCH_TOKEN is empty", ""},
		{"oversized file", file("big", strings.Repeat("x", auth.MaxTokenBytes+1), 0o600), "", "", "longer than", ""},
		{"missing file", filepath.Join(dir, "none"), "", "", "token file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tt.env)
			var warn bytes.Buffer
			got, err := loadToken(tt.file, &warn)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case string(got) != tt.want || (tt.want == "") != (got == nil):
				t.Errorf("token %q, want %q", got, tt.want)
			}
			if tt.warn == "" && warn.Len() > 0 || !strings.Contains(warn.String(), tt.warn) || strings.Count(warn.String(), "\n") > 1 {
				t.Errorf("warning %q, want %q", warn.String(), tt.warn)
			}
		})
	}
}
