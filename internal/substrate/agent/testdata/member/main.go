// Command member is the member program of the agent's tests: it serves
// GET /version on -addr, writes its address and pid to -ready (and its
// pid to -pid-file) once it listens, and on SIGTERM (or SIGUSR2, marked
// as such) appends a line to -marker, then exits after -term-delay (or
// not at all with -ignore-term). -starts appends its pid and start time
// to a file, -lines prints numbered lines, -read reports a file's
// content as it was at the start.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// version is set with -ldflags "-X main.version=1.0.0".
var version = "dev"

type info struct {
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	Addr     string `json:"addr"`
	Cwd      string `json:"cwd"`
	Greeting string `json:"greeting"`
	// File is the content of -read at the start ("" if unreadable);
	// FileMode its permission bits.
	File     string `json:"file"`
	FileMode string `json:"file_mode"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	ready := flag.String("ready", "", "file to write {pid,addr,...} to once listening")
	ver := flag.String("version", "", "version to report (default: built-in, or $MEMBER_VERSION)")
	marker := flag.String("marker", "", "file to append a line to on SIGTERM")
	termDelay := flag.Duration("term-delay", 0, "delay between SIGTERM and exit")
	ignoreTerm := flag.Bool("ignore-term", false, "do not exit on SIGTERM")
	exitAfter := flag.Duration("exit-after", -1, "exit on its own after this long")
	exitCode := flag.Int("exit-code", 0, "status for -exit-after")
	maxLife := flag.Duration("max-life", 2*time.Minute, "exit after this long whatever happens (leak guard)")
	starts := flag.String("starts", "", "file to append \"pid unix-nanoseconds\" to at the start")
	lines := flag.Int("lines", 0, "print this many numbered lines at the start")
	read := flag.String("read", "", "file whose content (at the start) is reported as file")
	pidFile := flag.String("pid-file", "", "file to write its pid to once listening")
	flag.String("tag", "", "ignored; lets tests find their processes")
	flag.Parse()

	if *starts != "" {
		if f, err := os.OpenFile(*starts, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			fmt.Fprintf(f, "%d %d\n", os.Getpid(), time.Now().UnixNano())
			f.Close()
		}
	}

	v := version
	if e := os.Getenv("MEMBER_VERSION"); e != "" {
		v = e
	}
	if *ver != "" {
		v = *ver
	}
	fmt.Printf("member version %s pid %d\n", v, os.Getpid())
	for i := range *lines {
		fmt.Printf("line %d of pid %d\n", i, os.Getpid())
	}
	var content, mode string
	if *read != "" {
		if b, err := os.ReadFile(*read); err == nil {
			content = string(b)
		}
		if fi, err := os.Stat(*read); err == nil {
			mode = fmt.Sprintf("%04o", fi.Mode().Perm())
		}
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGUSR2)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cwd, _ := os.Getwd()
	me := info{Version: v, PID: os.Getpid(), Addr: ln.Addr().String(), Cwd: cwd, Greeting: os.Getenv("GREETING"), File: content, FileMode: mode}
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(me)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	if *pidFile != "" {
		os.WriteFile(*pidFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644)
	}
	if *ready != "" {
		b, _ := json.Marshal(me)
		tmp := filepath.Join(filepath.Dir(*ready), fmt.Sprintf(".ready.%d", os.Getpid()))
		if err := os.WriteFile(tmp, b, 0o644); err == nil {
			os.Rename(tmp, *ready)
		}
	}

	var exitC <-chan time.Time
	if *exitAfter >= 0 {
		exitC = time.After(*exitAfter)
	}
	life := time.After(*maxLife)
	for {
		select {
		case sig := <-sigs:
			name := "SIGTERM"
			if sig == syscall.SIGUSR2 {
				name = "SIGUSR2"
			}
			fmt.Println("got " + name)
			if *marker != "" {
				if f, err := os.OpenFile(*marker, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
					fmt.Fprintf(f, "%s %d %s\n", name, os.Getpid(), v)
					f.Close()
				}
			}
			if *ignoreTerm {
				continue
			}
			time.Sleep(*termDelay)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			srv.Shutdown(ctx)
			cancel()
			os.Exit(0)
		case <-exitC:
			os.Exit(*exitCode)
		case <-life:
			fmt.Println("max-life reached")
			os.Exit(3)
		}
	}
}
