package live

import (
	"reflect"
	"testing"

	"github.com/mdlayher/ethtool"
	"golang.org/x/sys/unix"
)

func TestSpeedsOf(t *testing.T) {
	modes := []ethtool.AdvertisedLinkMode{
		{Name: "100000baseCR4/Full"}, {Name: "25000baseCR/Full"}, {Name: "100000baseSR4/Full"},
		{Name: "Autoneg"}, {Name: "Pause"}, {Name: "FEC_RS"}, {Name: "xbaseT"},
	}
	if got, want := speedsOf(modes), []int{25000, 100000}; !reflect.DeepEqual(got, want) {
		t.Errorf("speedsOf = %v, want %v", got, want)
	}
}

func TestFECNames(t *testing.T) {
	m := ethtool.FECModes(unix.ETHTOOL_FEC_AUTO | unix.ETHTOOL_FEC_RS | unix.ETHTOOL_FEC_BASER)
	if got, want := fecNames(m), []string{"Auto", "RS", "BaseR"}; !reflect.DeepEqual(got, want) {
		t.Errorf("fecNames = %v, want %v", got, want)
	}
}
