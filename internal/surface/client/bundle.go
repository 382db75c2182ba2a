package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Bundle copies the troubleshooting bundle of upgrade id ("current":
// the current, else the last one) into w, and returns the file name
// the server gives it. The server builds the whole archive before it
// answers, so an error comes as an *Error before any byte is copied.
func (c *Client) Bundle(ctx context.Context, id string, logLines int, w io.Writer) (string, error) {
	u := c.base.String() + "/v1/upgrades/" + url.PathEscape(id) + "/bundle"
	if logLines > 0 {
		u += "?log_lines=" + strconv.Itoa(logLines)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/gzip")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("server %s: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		e := &Error{Status: resp.StatusCode, Body: b}
		var eb struct{ Code, Message string }
		if json.Unmarshal(b, &eb) == nil && eb.Code != "" {
			e.Code, e.Message = eb.Code, eb.Message
		} else if e.Message = strings.TrimSpace(string(b)); e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return "", e
	}
	name := ""
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		name = params["filename"]
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return "", fmt.Errorf("server %s: the bundle: %w", c.base.Host, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return "", fmt.Errorf("server %s: the bundle ended after %d of %d bytes", c.base.Host, n, resp.ContentLength)
	}
	return name, nil
}
