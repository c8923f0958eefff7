package runner

import (
	"fmt"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
)

// placeInGroups is this process's group under NCCL_TESTS_SPLIT (every
// process alone in one group without it): the groups' process ranks,
// which group is ours, and our place in it.
func (r *runner) placeInGroups() (groups [][]int, group, idx int) {
	if r.o.Split == nil {
		all := make([]int, r.env.Size)
		for p := range all {
			all[p] = p
		}
		return [][]int{all}, 0, r.env.Rank
	}
	groups = r.o.Split.Groups(r.env.Size)
	for g, procs := range groups {
		for i, p := range procs {
			if p == r.env.Rank {
				return groups, g, i
			}
		}
	}
	panic("process rank in no group") // Groups covers 0..Size-1
}

// idWords is how many float64s carry a unique id through Reduce: four
// bytes each, exact in a float64.
const idWords = len(nccl.UniqueID{}) / 4

// groupID gives every process its group's communicator id: the first
// process of each group makes it (NCCL's root must be in the process that
// made the id, and it is the group's rank 0), and one Reduce (a sum, every
// other process adding zeros) carries all groups' ids to everyone.
func (r *runner) groupID() (nccl.UniqueID, error) {
	vals := make([]float64, len(r.groups)*idWords)
	if r.idx == 0 {
		id, err := r.lib.GetUniqueID()
		if err != nil {
			return nccl.UniqueID{}, fmt.Errorf("ncclGetUniqueId for group %d: %w", r.group, err)
		}
		for w := 0; w < idWords; w++ {
			b := id[4*w : 4*w+4]
			vals[r.group*idWords+w] = float64(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
		}
	}
	sum, err := r.grp.Reduce(vals, launch.Sum)
	if err != nil {
		return nccl.UniqueID{}, err
	}
	var id nccl.UniqueID
	for w := 0; w < idWords; w++ {
		v := sum[r.group*idWords+w]
		if v < 0 || v > 1<<32-1 || v != float64(uint32(v)) {
			return nccl.UniqueID{}, fmt.Errorf("group %d's communicator id came back damaged", r.group)
		}
		u := uint32(v)
		id[4*w], id[4*w+1], id[4*w+2], id[4*w+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return id, nil
}
