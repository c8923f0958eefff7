package results

import (
	"encoding/json"
	"strings"
	"testing"
)

// A quick mesh (schema 5) reads back with its verdict; one whose verdict
// names a rank it does not have is refused, as a full mesh's.
func TestDecodeMeshQuick(t *testing.T) {
	m := &Mesh{Kind: MeshKind, Schema: MeshQuickSchema, Ranks: []MeshRank{{Rank: 0}, {Rank: 1}, {Rank: 2}},
		Quick: &MeshQuick{Rounds: 10, RandomRounds: 4, Suspects: []QuickSuspect{{Kind: QuickNIC, Ranks: []int{2}, Ratio: 0.7, Text: "NIC of rank 2"}}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMesh(strings.NewReader(string(b)))
	if err != nil || got.Quick == nil || got.Quick.Suspects[0].Ranks[0] != 2 || !got.Quick.Blames() {
		t.Fatalf("read back %+v, %v", got, err)
	}
	for _, bad := range []*MeshQuick{
		{Suspects: []QuickSuspect{{Kind: QuickNIC, Ranks: []int{3}}}},
		{UnresolvedRanks: []int{-1}},
		{UnresolvedPairs: [][2]int{{0, 7}}},
	} {
		m.Quick = bad
		b, _ := json.Marshal(m)
		if _, err := DecodeMesh(strings.NewReader(string(b))); err == nil || !strings.Contains(err.Error(), "outside its 3 ranks") {
			t.Errorf("%+v: %v, want refused", bad, err)
		}
	}
	m.Quick, m.Schema = nil, MeshQuickSchema+1
	b, _ = json.Marshal(m)
	if _, err := DecodeMesh(strings.NewReader(string(b))); err == nil {
		t.Error("schema 6 read")
	}
	if (&MeshQuick{}).Blames() {
		t.Error("an empty verdict blames")
	}
}
