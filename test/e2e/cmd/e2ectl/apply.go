package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// cmdApply creates (or replaces) every object in a YAML/JSON manifest, and
// waits for CustomResourceDefinitions to be Established so that a client
// started right after can list the new kind.
func cmdApply(args []string) error {
	fs := flag.NewFlagSet("apply", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (required)")
	file := fs.String("f", "", "manifest (required)")
	kinds := fs.String("kinds", "", "comma-separated kinds to apply, the others skipped (default: all)")
	dryRun := fs.Bool("dry-run", false, "server-side dry run: the API server validates and admits every object, stores none")
	strict := fs.Bool("strict", false, "strict field validation: an unknown or duplicate field is an error, not a warning")
	_ = fs.Parse(args)
	only := map[string]bool{}
	for _, k := range strings.Split(*kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			only[k] = true
		}
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	n := 0
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("%s: %v", *file, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		if len(only) > 0 && !only[gvk.Kind] {
			fmt.Printf("skipped %s %s\n", gvk.Kind, obj.GetName())
			continue
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s: %v", *file, gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			ri = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		validation := ""
		if *strict {
			validation = "Strict"
		}
		ctx, cancel := ctxTimeout(30 * time.Second)
		if *dryRun {
			_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: validation})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			cancel()
			if err != nil {
				return fmt.Errorf("%s %s (dry run): %v", gvk.Kind, obj.GetName(), err)
			}
			n++
			fmt.Printf("valid %s %s\n", gvk.Kind, obj.GetName())
			continue
		}
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: validation})
		if apierrors.IsAlreadyExists(err) {
			var cur *unstructured.Unstructured
			if cur, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				obj.SetResourceVersion(cur.GetResourceVersion())
				_, err = ri.Update(ctx, obj, metav1.UpdateOptions{FieldValidation: validation})
			}
		}
		cancel()
		if err != nil {
			return fmt.Errorf("%s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		n++
		if gvk.Kind == "CustomResourceDefinition" {
			if err := waitEstablished(dyn, mapping.Resource, obj.GetName()); err != nil {
				return err
			}
		}
		fmt.Printf("applied %s %s\n", gvk.Kind, obj.GetName())
	}
	if n == 0 && len(only) == 0 {
		return fmt.Errorf("%s: no objects", *file)
	}
	return nil
}

func waitEstablished(dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := ctxTimeout(5 * time.Second)
		crd, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		cancel()
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]interface{})
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not Established after 30s", name)
}

// applyFile applies a manifest through `e2ectl apply`, with strict field
// validation if strict.
func (c *cluster) applyFile(path string, strict bool) {
	args := []string{"apply", "--kubeconfig", c.env.need("KUBECONFIG"), "-f", path}
	if strict {
		args = append(args, "--strict")
	}
	cmd := exec.Command(os.Args[0], args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		fail("e2ectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	logf("applied %s%s", filepath.Base(path), map[bool]string{true: " (strict)", false: ""}[strict])
}
