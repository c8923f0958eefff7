package kubetest

import "testing"

// The kubelet's expansion rules (third_party/forked/golang/expansion):
// known names replaced, unknown ones kept, $$ escapes, other $ kept.
func TestExpand(t *testing.T) {
	env := map[string]string{"POD_IP": "198.18.0.10", "EMPTY": "", "A": "$(B)"}
	for _, tc := range []struct{ in, want string }{
		{"$(POD_IP):7000", "198.18.0.10:7000"},
		{"$(MISSING):7000", "$(MISSING):7000"},
		{"x$(EMPTY)y", "xy"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"$$$(POD_IP)", "$198.18.0.10"},
		{"cost $5", "cost $5"},
		{"$(A)", "$(B)"}, // one pass: a value is not expanded again
		{"$(POD_IP", "$(POD_IP"},
		{"trailing $", "trailing $"},
		{"$", "$"},
		{"", ""},
	} {
		if got := expand(tc.in, env); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
