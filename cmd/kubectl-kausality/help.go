package main

// Each command's Help is the detailed help kong prints under its usage
// and summary (kubectl kausality <command> --help): examples, as
// crossplane's own commands give them.

// Help prints examples of trace.
func (t *TraceCmd) Help() string {
	return `
Examples:
  # The tree of an XR, in the current namespace.
  kubectl kausality trace xstores/shop

  # With each object's initiator and trace, watched.
  kubectl kausality trace xnetwork.aws.platform.example.org/shop -o wide -w

  # As a Graphviz graph.
  kubectl kausality trace databaseclaims/orders -n team-a -o dot | dot -Tsvg > orders.svg
`
}

// Help prints examples of status.
func (s *StatusCmd) Help() string {
	return `
Examples:
  # In the current namespace.
  kubectl kausality status

  # Everywhere.
  kubectl kausality status -A
`
}

// Help prints examples of explain.
func (e *ExplainCmd) Help() string {
	return `
Examples:
  # Every withheld change of an XR.
  kubectl kausality explain xnetworks/shop

  # Only the changes of one field of a managed resource.
  kubectl kausality explain instances.ec2.aws.m.upbound.io/shop-db spec.forProvider.instanceType

  # As JSON, for a script.
  kubectl kausality explain xstores/shop -o json
`
}

// Help prints examples of plan.
func (p *PlanCmd) Help() string {
	return `
Examples:
  # The change in shop.yaml, rendered with the Functions in functions.yaml.
  kubectl kausality plan -f shop.yaml --functions functions.yaml

  # In CI: exit 2 when admission would deny it or Kausality would withhold any of it.
  kubectl kausality plan -f shop.yaml --functions functions.yaml --exit-code
`
}

// Help prints examples of policy derive.
func (d *PolicyDeriveCmd) Help() string {
	return `
Examples:
  # A patch-and-transform Composition; the platform-team group starts changes.
  kubectl kausality policy derive -f composition.yaml --xrd xrd.yaml --group platform-team

  # A go-templating or sequenced pipeline, by a render experiment.
  kubectl kausality policy derive -f composition.yaml --xrd xrd.yaml --functions functions.yaml --group platform-team

  # A kro ResourceGraphDefinition.
  kubectl kausality policy derive -f rgd.yaml --group platform-team
`
}

// Help prints examples of policy check.
func (c *PolicyCheckCmd) Help() string {
	return `
Examples:
  # Every Composition and AllowancePolicy in the cluster.
  kubectl kausality policy check

  # Files, as in a repository's CI.
  kubectl kausality policy check -f composition.yaml --policy policy.yaml --xrd xrd.yaml --functions functions.yaml
`
}
