package kubernetes

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bottlefile/bottlefile/drivers"
)

// An agent's driver block on a kubernetes runtime places its bottle's
// Pods, as swarm's placement does its services:
//
//	driver {
//	  node_selector = { "pool" = "agents" }
//	  tolerations   = [{ key = "dedicated", operator = "Equal", value = "agents", effect = "NoSchedule" }]
//	}
const (
	attrNodeSelector = "node_selector"
	attrTolerations  = "tolerations"
)

// tolerationType is one toleration, as a Pod's: every attribute optional.
var tolerationType = cty.ObjectWithOptionalAttrs(map[string]cty.Type{
	"key":      cty.String,
	"operator": cty.String,
	"value":    cty.String,
	"effect":   cty.String,
}, []string{"key", "operator", "value", "effect"})

// placement is an agent's driver block, decoded and checked.
type placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// decodePlacement reads an agent's driver block. Values not known yet
// are left out (the planner plans again once they are).
func decodePlacement(v cty.Value) (placement, error) {
	var p placement
	if v == cty.NilVal || v.IsNull() {
		return p, nil
	}
	v, _ = v.UnmarkDeep()
	if !v.IsWhollyKnown() || !v.Type().IsObjectType() {
		return p, nil
	}
	if v.Type().HasAttribute(attrNodeSelector) && !v.GetAttr(attrNodeSelector).IsNull() {
		m, err := drivers.StringMap(v.GetAttr(attrNodeSelector))
		if err != nil {
			return p, fmt.Errorf("%s: %w", attrNodeSelector, err)
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return p, fmt.Errorf("%s: %q is not a node label name: %s", attrNodeSelector, k, errs[0])
			}
			if errs := validation.IsValidLabelValue(m[k]); len(errs) > 0 {
				return p, fmt.Errorf("%s: %q = %q is not a node label value: %s", attrNodeSelector, k, m[k], errs[0])
			}
		}
		if len(m) > 0 {
			p.NodeSelector = m
		}
	}
	if v.Type().HasAttribute(attrTolerations) && !v.GetAttr(attrTolerations).IsNull() {
		i := 0
		for it := v.GetAttr(attrTolerations).ElementIterator(); it.Next(); i++ {
			_, e := it.Element()
			get := func(name string) string {
				if !e.Type().HasAttribute(name) || e.GetAttr(name).IsNull() {
					return ""
				}
				return e.GetAttr(name).AsString()
			}
			t := corev1.Toleration{
				Key:      get("key"),
				Operator: corev1.TolerationOperator(get("operator")),
				Value:    get("value"),
				Effect:   corev1.TaintEffect(get("effect")),
			}
			if err := checkToleration(t); err != nil {
				return p, fmt.Errorf("%s: toleration %d: %w", attrTolerations, i+1, err)
			}
			p.Tolerations = append(p.Tolerations, t)
		}
	}
	return p, nil
}

// checkToleration refuses what the API server would refuse of a
// toleration, saying it at plan rather than at apply.
func checkToleration(t corev1.Toleration) error {
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return fmt.Errorf("operator Exists takes no value (it tolerates every value of %q)", t.Key)
		}
	default:
		return fmt.Errorf("operator %q is neither %q nor %q", t.Operator, corev1.TolerationOpEqual, corev1.TolerationOpExists)
	}
	if t.Key == "" && t.Operator != corev1.TolerationOpExists {
		return fmt.Errorf("a toleration without a key must have operator %q", corev1.TolerationOpExists)
	}
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("key %q: %s", t.Key, errs[0])
		}
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("effect %q is not one of NoSchedule, PreferNoSchedule, NoExecute", t.Effect)
	}
	return nil
}

// placementAttrs are an agent's placement as its Pods' objects record it.
func placementAttrs(p placement) map[string]cty.Value {
	sel := cty.MapValEmpty(cty.String)
	if len(p.NodeSelector) > 0 {
		m := map[string]cty.Value{}
		for k, v := range p.NodeSelector {
			m[k] = cty.StringVal(v)
		}
		sel = cty.MapVal(m)
	}
	tol := cty.ListValEmpty(cty.String)
	if len(p.Tolerations) > 0 {
		vals := make([]cty.Value, len(p.Tolerations))
		for i, t := range p.Tolerations {
			vals[i] = cty.StringVal(fmt.Sprintf("%s|%s|%s|%s", t.Key, t.Operator, t.Value, t.Effect))
		}
		tol = cty.ListVal(vals)
	}
	return map[string]cty.Value{attrNodeSelector: sel, attrTolerations: tol}
}

// placementOf reads the placement an object records back.
func placementOf(o drivers.Object) (placement, error) {
	var p placement
	sel, err := drivers.StringMap(o.Attr(attrNodeSelector))
	if err != nil {
		return p, fmt.Errorf("%s: %w", attrNodeSelector, err)
	}
	if len(sel) > 0 {
		p.NodeSelector = sel
	}
	tols, err := drivers.Strings(o.Attr(attrTolerations))
	if err != nil {
		return p, fmt.Errorf("%s: %w", attrTolerations, err)
	}
	for _, s := range tols {
		var parts [4]string
		copy(parts[:], strings.SplitN(s, "|", 4))
		p.Tolerations = append(p.Tolerations, corev1.Toleration{Key: parts[0], Operator: corev1.TolerationOperator(parts[1]), Value: parts[2], Effect: corev1.TaintEffect(parts[3])})
	}
	return p, nil
}
