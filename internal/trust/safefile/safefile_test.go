package safefile

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRead: every kind of file that is not a regular file, and a file
// over the limit, is refused at once with a message naming the path and
// what it is; a regular file within the limit is read.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse") // 2 GiB, no block written
	if f, err := os.Create(sparse); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("cluster: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	cases := []struct {
		name, path string
		want       error  // errors.Is
		msg        string // in the message, with the path
		content    string
	}{
		{"a regular file", ok, nil, "", "cluster: x\n"},
		{"exactly the limit", exact, nil, "", strings.Repeat("\x00", 100)},
		{"a FIFO", fifo, ErrNotRegular, "a named pipe (FIFO), not a regular file", ""},
		{"a symbolic link to a FIFO", link, ErrNotRegular, "a named pipe (FIFO)", ""},
		{"a directory", dir, ErrNotRegular, "a directory, not a regular file", ""},
		{"/dev/zero", "/dev/zero", ErrNotRegular, "a character device (like /dev/zero)", ""},
		{"a socket", sock, ErrNotRegular, "a socket", ""},
		{"one byte over", big, ErrTooLarge, "is 101 bytes, more than the 100 bytes allowed", ""},
		{"2 GiB, sparse", sparse, ErrTooLarge, "is 2147483648 bytes", ""},
		{"missing", filepath.Join(dir, "none"), fs.ErrNotExist, "no such file", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			b, err := Read(c.path, 100, time.Second)
			if d := time.Since(began); d > 500*time.Millisecond {
				t.Errorf("took %s: not at once", d)
			}
			if c.want == nil {
				if err != nil || string(b) != c.content {
					t.Fatalf("Read = %q, %v; want %q", b, err, c.content)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Read: %v; want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q: want the path and %q", err, c.msg)
			}
		})
	}
}

// TestReadOpenedTimeout: a read that does not end within the deadline
// returns ErrTimeout at the deadline (a pipe with no data stands for a
// hung filesystem, whose reads cannot be interrupted either).
func TestReadOpenedTimeout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	began := time.Now()
	_, err = ReadOpened(r, "the pipe", 10, 100*time.Millisecond)
	if d := time.Since(began); !errors.Is(err, ErrTimeout) || d > time.Second {
		t.Fatalf("ReadOpened: %v after %s; want ErrTimeout after 100ms", err, d)
	}
	if !strings.Contains(err.Error(), "the pipe") || !strings.Contains(err.Error(), "100ms") {
		t.Errorf("message %q: want the path and the deadline", err)
	}
}

// TestOpenIn: a name leading out of the root, by .. or by a symbolic
// link, is refused; one inside is opened and checked.
func TestOpenIn(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "art"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, fi, err := OpenIn(root, "art", "art")
	if err != nil || fi.Size() != 1 {
		t.Fatalf("OpenIn(art): %v %v", fi, err)
	}
	f.Close()
	for _, name := range []string{"escape", "../" + filepath.Base(outside) + "/secret"} {
		if f, _, err := OpenIn(root, name, name); err == nil {
			f.Close()
			t.Errorf("OpenIn(%s): no error, want a refusal", name)
		}
	}
	if _, _, err := OpenIn(root, "fifo", "fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenIn(fifo): %v, want ErrNotRegular", err)
	}
}

func TestSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{1 << 30, "1 GiB"}, {8 << 20, "8 MiB"}, {4096, "4 KiB"}, {100, "100 bytes"}, {1<<20 + 1, "1048577 bytes"}} {
		if got := Size(c.n); got != c.want {
			t.Errorf("Size(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// TestWriteAtomic: the file is replaced whole with the mode asked (not
// the umask's), and a failed write leaves the old file and no
// temporary beside it.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFileAtomic(p, 0o600, []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, 0o640, []byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two\n" {
		t.Errorf("content %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %#o, want 0640", fi.Mode().Perm())
	}
	boom := errors.New("boom")
	if err := WriteAtomic(p, 0o600, func(w io.Writer) error { w.Write([]byte("half")); return boom }); !errors.Is(err, boom) {
		t.Errorf("a failed write: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two\n" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left in the directory: %v", es)
	}
}
