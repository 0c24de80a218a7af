"""Adapter components and where they live in CloudFormation: placement across nested stacks, pacing.

One stack holds at most 500 resources, so a fleet of a thousand adapters cannot sit in the
endpoint's own stack. Adapter components are spread over a fixed number of nested stacks
("shards"), each adapter placed by a hash of its name. Placement depends on nothing but the name
and the shard count, so adding or removing an adapter never moves another one: a component that
moved between stacks would be deleted in one and created in the other, and its deterministic name
would collide during the create.

The shard count is therefore fixed for an endpoint's life (changing it moves components), and each
shard has a capacity well under CloudFormation's limit; a full shard is a synth error that says
what to do. `FleetPlacement.in_endpoint_stack()` keeps components in the endpoint's own stack, as
endpoints built before fleet placement existed have them (switching would move every component).

Pacing: SageMaker publishes no rate limit for creating inference components. With
``creation_width=W``, the components of each stack form W dependency chains, so CloudFormation
creates at most W of them at once per stack. An adapter joins the chain a hash of its name picks
and depends on the one added before it in that chain, so removing a component re-links only its
successor in its chain (a DependsOn change only: no property changes, so CloudFormation neither
updates nor replaces it). Off by default.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import jsii
from aws_cdk import CfnResource, NestedStack, Stack
from constructs import Construct, IValidation

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.endpoint.components import AdapterInferenceComponent, BaseInferenceComponent
from cdk_adapters.problems import Problem

CLOUDFORMATION_RESOURCE_LIMIT = 500
"""Resources per template (CloudFormation quotas; CDK refuses more at synth)."""
DEFAULT_SHARDS = 8
DEFAULT_SHARD_CAPACITY = 400
"""Resources per shard: a fifth of CloudFormation's limit kept free, so per-adapter extras fit."""
MAX_SHARDS = 100
STACK_RESOURCE_LIMIT_CONTEXT = "@aws-cdk/core:stackResourceLimit"
"""The context key CDK reads for a stack's resource limit (default 500)."""
IN_STACK_BUDGET = 450
"""Resources the endpoint's own stack may hold when components stay in it: a clear error well
before CloudFormation's (and CDK's) 500."""


@dataclass(frozen=True)
class FleetPlacement:
    """How an endpoint's adapter components are laid out in CloudFormation.

    The defaults carry about 3,000 adapters: 8 nested stacks of at most 400 resources each
    (hash placement fills them evenly: at 1,000 adapters the fullest holds about 150).
    """

    shards: int = DEFAULT_SHARDS
    """Nested stacks the components are hashed into; 0 keeps them in the endpoint's own stack.
    Fixed for the endpoint's life: changing it moves components (and their names collide)."""
    shard_capacity: int = DEFAULT_SHARD_CAPACITY
    """Most resources one shard may hold (components plus anything added beside them). Default
    400; CloudFormation allows 500."""
    creation_width: int | None = None
    """Create at most this many adapter components at once per stack (dependency chains).
    Default None: as many as CloudFormation does in parallel."""

    @staticmethod
    def in_endpoint_stack(*, creation_width: int | None = None) -> FleetPlacement:
        """Components in the endpoint's own stack (fleets well under 500 resources; endpoints
        deployed before nested placement existed)."""
        return FleetPlacement(shards=0, creation_width=creation_width)

    def problems(self, subject: str) -> list[Problem]:
        found: list[Problem] = []
        if not _is_int(self.shards) or not 0 <= self.shards <= MAX_SHARDS:
            found.append(Problem(subject, "placement.shards", f"must be an integer from 0 to {MAX_SHARDS}, got {self.shards!r}"))
        if not _is_int(self.shard_capacity) or not 1 <= self.shard_capacity < CLOUDFORMATION_RESOURCE_LIMIT:
            found.append(
                Problem(
                    subject,
                    "placement.shard_capacity",
                    f"must be an integer from 1 to {CLOUDFORMATION_RESOURCE_LIMIT - 1} (CloudFormation allows "
                    f"{CLOUDFORMATION_RESOURCE_LIMIT} resources per stack), got {self.shard_capacity!r}",
                )
            )
        width = self.creation_width
        if width is not None and (not _is_int(width) or width < 1):
            found.append(
                Problem(
                    subject,
                    "placement.creation_width",
                    f"must be a positive integer (components created at once per stack) or None, got {width!r}",
                )
            )
        return found

    def lane_of(self, adapter_name: str) -> int:
        """The pacing chain an adapter joins in its stack: a hash of its name, like its shard, so
        adding or removing another adapter never moves it to another chain."""
        assert self.creation_width is not None
        digest = hashlib.sha256(b"lane\0" + adapter_name_key(adapter_name).encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.creation_width

    def shard_of(self, adapter_name: str) -> int:
        """The shard an adapter always lands in: a hash of its lower-cased name (SageMaker names
        are case-insensitive), independent of every other adapter."""
        digest = hashlib.sha256(adapter_name_key(adapter_name).encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.shards


class AdapterFleet(Construct):
    """The adapter components of one endpoint, placed by `FleetPlacement`.

    Shards are created on first use; each depends on the base component and on `prerequisites`
    (the role's policies), so CloudFormation deletes adapters before the base, and the base
    before the endpoint, whichever stack they are in.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        placement: FleetPlacement,
        base: BaseInferenceComponent,
        endpoint_name: str,
        prerequisites: list[CfnResource],
        tier_bases: list[BaseInferenceComponent] | None = None,
    ) -> None:
        """
        :param tier_bases: the base components of the endpoint's rank tiers above the first (`base`);
            a shard waits for every base, as it may hold adapters of any tier.
        :param endpoint_name: the endpoint's name (a token in the endpoint's stack is fine; a
            shard receives it as one nested-stack parameter, which also orders it after the endpoint).
        :param prerequisites: resources every component must wait for (the role's policies).
        """
        super().__init__(scope, id)
        self.placement = placement
        self._base = base
        self._bases = [base, *(tier_bases or ())]
        self._endpoint_name = endpoint_name
        self._prerequisites = list(prerequisites)
        self._shards: dict[int, NestedStack] = {}
        self._lanes: dict[int, list[AdapterInferenceComponent | None]] = {}
        self._load: dict[int, int] = {}
        """Resources per shard: components and what was reserved beside them."""
        self.components: dict[str, AdapterInferenceComponent] = {}
        """`adapter_name_key(name)` -> its component, in the order added."""
        self.node.add_validation(_CapacityValidation(self))

    def component(self, adapter_name: object) -> AdapterInferenceComponent | None:
        """The component of `adapter_name` (compared as SageMaker compares names), or None."""
        return self.components.get(adapter_name_key(adapter_name)) if isinstance(adapter_name, str) else None

    @property
    def shards(self) -> dict[int, NestedStack]:
        """Shard number -> its nested stack, for the shards that hold components."""
        return dict(self._shards)

    def stack_of(self, adapter_name: str) -> Stack:
        """The stack an adapter's component is (or would be) in."""
        if self.placement.shards == 0:
            return Stack.of(self)
        return self._shard(self.placement.shard_of(adapter_name))

    def capacity_problems(
        self, adapter_name: str, subject: str, *, resources: int = 1, what: str = "its component"
    ) -> list[Problem]:
        """A problem when `resources` more (the component, and extras such as its alarms) would put
        the adapter's stack past its capacity; checked before anything is created.

        Shards are counted in Python as resources are added (`add`, `reserve`): walking a shard's
        tree per adapter would cost a jsii round trip per construct. In the endpoint's own stack only
        extras are checked here (by walking that small stack); components there are checked at synth.
        """
        if self.placement.shards == 0:
            if resources <= 1:
                return []
            held, budget, where = own_resource_count(Stack.of(self)), IN_STACK_BUDGET, "the endpoint's stack"
        else:
            shard = self.placement.shard_of(adapter_name)
            held, budget, where = self._load.get(shard, 0), self.placement.shard_capacity, f"its shard (Shard{shard})"
        if held + resources <= budget:
            return []
        return [
            Problem(
                subject,
                "placement" if what == "its component" else "alarms",
                f"{what} would put {where} at {held + resources} resources, over its capacity of {budget} "
                "(placement.shard_capacity). Serve further adapters from another MultiAdapterEndpoint (a new one may "
                "use more shards: FleetPlacement(shards=N)), or opt fewer adapters into alarms; changing the shard "
                "count of a deployed endpoint would move components",
            )
        ]

    def reserve(self, adapter_name: str, resources: int) -> None:
        """Count `resources` created beside an adapter's component (in its shard) against the capacity."""
        if self.placement.shards:
            shard = self.placement.shard_of(adapter_name)
            self._load[shard] = self._load.get(shard, 0) + resources

    def add(
        self, adapter_name: str, component_name: str, artifact: AdapterArtifact, *, base: BaseInferenceComponent | None = None
    ) -> AdapterInferenceComponent:
        """Create the adapter's component in its stack, behind its lane's last component, attached
        to `base` (a rank tier's base component; default the endpoint's)."""
        base = base or self._base
        shard = -1 if self.placement.shards == 0 else self.placement.shard_of(adapter_name)
        scope: Construct = self if shard < 0 else self._shard(shard)
        component = AdapterInferenceComponent(
            scope,
            adapter_name,
            adapter_name=adapter_name,
            inference_component_name=component_name,
            endpoint_name=self._endpoint_name,
            base_component_name=base.inference_component_name,
            artifact=artifact,
        )
        if shard < 0:
            # Same stack: the component itself waits for its base and the role's policies.
            component.resource.add_resource_dependency(base.resource)
            for prerequisite in self._prerequisites:
                component.resource.add_resource_dependency(prerequisite)
        self._pace(shard, component)
        self.reserve(adapter_name, 1)
        self.components[adapter_name_key(adapter_name)] = component
        return component

    def add_prerequisite(self, resource: CfnResource) -> None:
        """Make every component (existing and future) wait for `resource`, e.g. a new policy."""
        if resource in self._prerequisites:
            return
        self._prerequisites.append(resource)
        if self.placement.shards == 0:
            for component in self.components.values():
                component.resource.add_resource_dependency(resource)
        else:
            for shard in self._shards.values():
                nested = shard.nested_stack_resource
                assert nested is not None, "a nested stack always has its resource in the parent"
                nested.add_resource_dependency(resource)

    def _shard(self, number: int) -> NestedStack:
        shard = self._shards.get(number)
        if shard is None:
            shard = NestedStack(
                self,
                f"Shard{number}",
                description=f"cdk-adapters: adapter components, shard {number} of {self.placement.shards}, of {self.node.path}",
            )
            # CDK refuses, at synth, a stack with more resources than this context value allows.
            shard.node.set_context(STACK_RESOURCE_LIMIT_CONTEXT, self.placement.shard_capacity)
            resource = shard.nested_stack_resource
            assert resource is not None
            for base in self._bases:
                resource.add_resource_dependency(base.resource)
            for prerequisite in self._prerequisites:
                resource.add_resource_dependency(prerequisite)
            self._shards[number] = shard
        return shard

    def _pace(self, shard: int, component: AdapterInferenceComponent) -> None:
        width = self.placement.creation_width
        if width is None:
            return
        lanes = self._lanes.setdefault(shard, [None] * width)
        lane = self.placement.lane_of(component.adapter_name)
        previous = lanes[lane]
        if previous is not None:
            component.resource.add_resource_dependency(previous.resource)
        lanes[lane] = component


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def own_resource_count(stack: Stack) -> int:
    """CloudFormation resources defined in `stack` itself, not in stacks nested in it."""
    path = stack.node.path
    return sum(
        1 for construct in stack.node.find_all() if isinstance(construct, CfnResource) and Stack.of(construct).node.path == path
    )


@jsii.implements(IValidation)
class _CapacityValidation:
    """At synth, once: the endpoint's own stack, when components stay in it, keeps within budget."""

    def __init__(self, fleet: AdapterFleet) -> None:
        self._fleet = fleet

    def validate(self) -> list[str]:
        placement = self._fleet.placement
        if placement.shards == 0:
            stack = Stack.of(self._fleet)
            held = own_resource_count(stack)
            if held <= IN_STACK_BUDGET:
                return []
            return [
                f"{stack.node.path}: holds {held} resources with {len(self._fleet.components)} adapter components in "
                f"the endpoint's own stack; CloudFormation allows {CLOUDFORMATION_RESOURCE_LIMIT} and this library "
                f"stops at {IN_STACK_BUDGET}. Serve further adapters from another MultiAdapterEndpoint (moving "
                "these components to nested stacks (FleetPlacement(shards=N)) would delete and re-create them)"
            ]
        # Shards need no walk here: `add` refuses a component past the capacity (with advice), and
        # each shard carries the capacity as CDK's own per-stack resource limit, which CDK checks
        # while it synthesizes, so anything else placed in a shard (per-adapter alarms) cannot
        # overflow it either.
        return []
