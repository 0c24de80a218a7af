"""The discovery record's base-model facts are the gate's, field for field: one list, both ways."""

from dataclasses import fields

from cdk_adapters.contract.discovery import ServedBaseModel
from cdk_adapters.endpoint import serving_reference
from cdk_adapters.gate import BaseModelFacts, Reference


def test_the_record_holds_exactly_the_gates_base_model_fields():
    assert {f.name for f in fields(ServedBaseModel)} == {f.name for f in fields(BaseModelFacts)}


def test_every_fact_survives_publishing_and_reading_back():
    facts = BaseModelFacts(
        model_id="org/base",
        revision="abc123",
        module_names=frozenset({"q_proj", "v_proj"}),
        hidden_size=64,
        vision_language=True,
        module_shapes=frozenset({("q_proj", 64, 64), ("v_proj", 16, 64)}),
        architecture="LlavaForConditionalGeneration",
        vision_tower_type="clip_vision_model",
        vision_feature_select_strategy="default",
    )
    published = serving_reference.publish(Reference(facts, 32, True), [])
    assert published.base_model is not None and published.base_model.module_names == ("q_proj", "v_proj")
    assert published.max_lora_rank == 32
    back = serving_reference.gate_reference(published)
    assert back.base == facts and back.max_lora_rank == 32 and back.allow_vision_modules


def test_an_unset_rank_is_published_as_the_rank_vllm_serves():
    assert serving_reference.publish(Reference(None, None, False), []).max_lora_rank == 16
