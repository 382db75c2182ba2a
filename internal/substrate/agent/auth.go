package agent

import "github.com/ferry-upgrade/ferry/internal/trust/bearer"

// loadToken reads the agent's bearer token from path, or creates the
// file with a fresh random one (bearer.LoadOrCreate).
func loadToken(path string) (string, error) {
	tok, _, err := bearer.LoadOrCreate(path)
	return tok, err
}
