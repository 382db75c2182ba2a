package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestKubernetesExample: examples/kubernetes validates, and its
// manifests hold every workload its description names (kind, namespace,
// name, container), at an image whose tag is the first release's and
// whose repository is that release's artifact for the component: what
// the README's commands need to run as written.
func TestKubernetesExample(t *testing.T) {
	c, err := Load("../../../examples/kubernetes/cluster.yaml")
	if err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	if c.Substrate != SubstrateKubernetes || len(c.Components) == 0 || len(c.Releases) < 2 {
		t.Fatalf("substrate %q, %d components, %d releases: want kubernetes, some, two", c.Substrate, len(c.Components), len(c.Releases))
	}
	b, err := os.ReadFile("../../../examples/kubernetes/workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Kind     string `yaml:"kind"`
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			Template struct {
				Spec struct {
					Containers []struct{ Name, Image string }
				}
			}
		}
	}
	images := map[string]string{} // kind/namespace/name/container → image
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("workloads.yaml: %v", err)
		}
		for _, ct := range o.Spec.Template.Spec.Containers {
			images[o.Kind+"/"+o.Metadata.Namespace+"/"+o.Metadata.Name+"/"+ct.Name] = ct.Image
		}
	}
	first := c.Releases[0]
	for _, comp := range c.Components {
		w := comp.Workload
		if w == nil {
			t.Errorf("component %s has no workload", comp.Name)
			continue
		}
		key := w.Kind + "/" + w.Namespace + "/" + w.Name + "/" + w.Container
		img, ok := images[key]
		art := first.Artifacts[comp.Name]
		if !ok || img != art.Image || !strings.HasSuffix(img, ":"+first.Version) {
			t.Errorf("component %s: workloads.yaml has %s at %q; want its release %s image %q", comp.Name, key, img, first.Version, art.Image)
		}
	}
}
