package sim

import (
	"testing"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/run/store/storetest"
)

// TestStoreContract runs the records' suite on the simulation's store:
// its engines are refused as the real stores refuse them.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Subject {
		s := NewStore()
		return storetest.Subject{
			Writer:   func(*testing.T, string) store.Records { return s },
			NoExpiry: "the simulation's claims are taken, never leased: they do not expire",
		}
	})
}
