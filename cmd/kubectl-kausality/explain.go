package main

import (
	"context"
	"os"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/explain"
)

// ExplainCmd is `kubectl kausality explain TYPE/NAME [FIELD]`.
type ExplainCmd struct {
	Resource string `arg:"" help:"TYPE/NAME of a Claim, XR or managed resource, as kubectl takes it (xnetworks/shop, instances.ec2.aws.m.upbound.io/shop-db)."`
	Field    string `arg:"" optional:"" help:"Only changes of this field or below or above it, e.g. spec.forProvider.instanceType."`
	Output   string `default:"text" enum:"text,json,yaml" help:"Output format: text, json or yaml." short:"o"`
}

// Run prints which policy decided each withheld change and what would
// permit it.
func (e *ExplainCmd) Run(c *CLI) error {
	s, err := c.connect()
	if err != nil {
		return err
	}
	return explain.Run(context.Background(), s.reader, s.mapper, s.namespace, e.Resource, e.Field, e.Output, os.Stdout)
}
