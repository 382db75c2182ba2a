package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// Named is a token and the identity it stands for: what a server
// records as who made a change (an override's "by") when a request
// carries it.
type Named struct {
	Name  string
	Token string
}

// String names the token's holder and never says the token: a Named
// printed by mistake (%v, a log) leaks nothing.
func (n Named) String() string { return n.Name }

// GoString is String for %#v.
func (n Named) GoString() string { return "bearer.Named{Name: " + fmt.Sprintf("%q", n.Name) + "}" }

// MaxNamedFile bounds a tokens file: thousands of lines, not a dump.
const MaxNamedFile = 1 << 20

// nameRule is what a token's name may be: a user name, an email-like
// user@host, a team; no spaces, nothing a log or an event would need
// to quote.
var nameRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

// ValidName reports whether name may name a token.
func ValidName(name string) bool { return nameRule.MatchString(name) }

// ReadNamed reads a tokens file: one "NAME TOKEN" per line, blank lines
// and lines beginning with # ignored. The file must be a regular file
// that group and others may not access (as a token file), of at most
// MaxNamedFile bytes. Each name and each token appears once, and a
// token is at least MinLength characters: a refusal names the file and
// the line, never the token.
func ReadNamed(path string) ([]Named, error) {
	f, fi, err := safefile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("tokens file %s has mode %#o: it must not be readable or writable by group or others (chmod 600 %s)", path, perm, path)
	}
	b, err := safefile.ReadOpened(f, path, MaxNamedFile, safefile.DefaultTimeout)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return ParseNamed(b, path)
}

// ParseNamed parses a tokens file's content; file names it in errors.
func ParseNamed(b []byte, file string) ([]Named, error) {
	var out []Named
	names := map[string]int{}
	tokens := map[[sha256.Size]byte]int{}
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		name := fields[0]
		switch {
		case !ValidName(name):
			return nil, fmt.Errorf("%s:%d: a token's name is a letter or digit, then up to 127 letters, digits, '.', '_', '@', '+' or '-' (the line's first word is not)", file, n)
		case len(fields) == 1:
			return nil, fmt.Errorf("%s:%d: %s has no token: want \"NAME TOKEN\"", file, n, name)
		case len(fields) > 2:
			return nil, fmt.Errorf("%s:%d: %s: more than a name and a token on the line", file, n, name)
		}
		tok := fields[1]
		switch {
		case len(tok) < MinLength:
			return nil, fmt.Errorf("%s:%d: %s's token is shorter than %d characters", file, n, name, MinLength)
		case len(tok) > maxSize:
			return nil, fmt.Errorf("%s:%d: %s's token is longer than %d characters", file, n, name, maxSize)
		case strings.ContainsFunc(tok, func(r rune) bool { return r < 0x21 || r > 0x7e }):
			return nil, fmt.Errorf("%s:%d: %s's token holds a character that is not printable ASCII", file, n, name)
		}
		if at, ok := names[name]; ok {
			return nil, fmt.Errorf("%s:%d: %s is named already on line %d: one token per name", file, n, name, at)
		}
		h := sha256.Sum256([]byte(tok))
		if at, ok := tokens[h]; ok {
			return nil, fmt.Errorf("%s:%d: %s's token is the token of line %d: a token stands for one name", file, n, name, at)
		}
		names[name], tokens[h] = n, n
		out = append(out, Named{Name: name, Token: tok})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no token in it: want one \"NAME TOKEN\" per line", file)
	}
	return out, nil
}

// Identities checks requests against several named tokens and says
// whose token a request carries. It holds the tokens' hashes only.
type Identities struct {
	names  []string
	hashes [][sha256.Size]byte
}

// NewIdentities checks requests against tokens. Their names and tokens
// must be unique (ReadNamed checks a file's): else an error naming the
// name, never the token.
func NewIdentities(tokens []Named) (*Identities, error) {
	id := &Identities{}
	seen := map[[sha256.Size]byte]string{}
	names := map[string]bool{}
	for _, t := range tokens {
		if !ValidName(t.Name) {
			return nil, fmt.Errorf("token name %q: a letter or digit, then letters, digits, '.', '_', '@', '+' or '-'", t.Name)
		}
		if len(t.Token) < MinLength {
			return nil, fmt.Errorf("%s's token is shorter than %d characters", t.Name, MinLength)
		}
		h := sha256.Sum256([]byte(t.Token))
		if other, ok := seen[h]; ok {
			return nil, fmt.Errorf("%s's token is %s's too: a token stands for one name", t.Name, other)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("%s has two tokens: one token per name", t.Name)
		}
		seen[h], names[t.Name] = t.Name, true
		id.names = append(id.names, t.Name)
		id.hashes = append(id.hashes, h)
	}
	if len(id.names) == 0 {
		return nil, fmt.Errorf("no token: a server needs at least one")
	}
	return id, nil
}

// Names lists the tokens' names, in the order given.
func (id *Identities) Names() []string { return append([]string(nil), id.names...) }

// Identify returns the name of the token r carries, or ErrMissing,
// ErrScheme or ErrInvalid. Every token's hash is compared, in constant
// time each, whichever matches: the time taken says neither which
// token nor how long.
func (id *Identities) Identify(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", ErrMissing
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrScheme
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := -1
	for i := range id.hashes {
		if subtle.ConstantTimeCompare(got[:], id.hashes[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", ErrInvalid
	}
	return id.names[match], nil
}
