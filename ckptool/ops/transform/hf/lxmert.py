"""LXMERT: no TF release exists (airsplay/lxmert is PyTorch); transformers 4.57's
``load_tf_weights_in_lxmert`` is a copy of BERT's, so what it loads is a checkpoint under Google
BERT's naming rules applied to LXMERT's own modules: ``lxmert/encoder/layer_N/attention/self/query/
kernel``, the cross-modality layers ``lxmert/encoder/x_layers/N/visual_attention/att/...`` (``/N``,
not ``_N``: that loader reads ``layer_N`` only when the scope is letters alone), ``r_layers/N``,
``lxmert/encoder/visn_fc/{visn_fc,box_fc,visn_layer_norm,box_layer_norm}``, ``cls/predictions``,
``cls/seq_relationship/output_weights``, ``obj_predict_head/decoder_dict/{obj,attr,feat}``,
``answer_head/logit_fc/{0,2,3}``. As that loader: kernels transposed, ``gamma``/``beta`` -> ``weight``/
``bias``, ``output_weights`` kept, ``cls/predictions/output_bias`` -> ``cls.predictions.bias`` (the
decoder tied to the word embeddings). ``x_layers_N``/``r_layers_N``/``logit_fc_N`` are read too.

The config: an HF ``config.json`` or a JSON under transformers' names (``bert_config.json``'s and
LXMERT's: ``l_layers``, ``x_layers``, ``r_layers``, ``visual_feat_dim``, ...); the layer counts,
widths and label counts from the tensors; ``num_attention_heads`` must be given.
"""

from __future__ import annotations

import dataclasses

from ckptool.ops.transform.hf.bert import PRETRAINING, embedding_rules
from ckptool.ops.transform.hf.weightmap import Arch, Rule, dense, norm

H, FF = "hidden_size", "intermediate_size"
_E = "lxmert/encoder"


def _attention(tf: str, hf: str, inner: str) -> list[Rule]:
    """BERT's attention block: ``{inner}/{query,key,value}`` and ``output/dense``, ``output/LayerNorm``."""
    return [*dense(rf"{tf}/{inner}/(?P<p>query|key|value)", f"{hf}.{inner}.{{p}}", H, H),
            *dense(f"{tf}/output/dense", f"{hf}.output.dense", H, H),
            *norm(f"{tf}/output/LayerNorm", f"{hf}.output.LayerNorm", H)]


def _ffn(tf: str, hf: str, inter: str, out: str) -> list[Rule]:
    return [*dense(f"{tf}/{inter}/dense", f"{hf}.{inter}.dense", FF, H),
            *dense(f"{tf}/{out}/dense", f"{hf}.{out}.dense", H, FF),
            *norm(f"{tf}/{out}/LayerNorm", f"{hf}.{out}.LayerNorm", H)]


def _single(tf: str, hf: str) -> list[Rule]:
    return [*_attention(f"{tf}/attention", f"{hf}.attention", "self"), *_ffn(tf, hf, "intermediate", "output")]


def _body(hf: str) -> list[Rule]:
    """The model's rules; ``lxmert/`` optional (``LxmertModel``'s own modules are at the top)."""
    return [dataclasses.replace(r, tf=r.tf.replace("lxmert/", "(?:lxmert/)?", 1)) for r in _named(hf)]


def _named(hf: str) -> list[Rule]:
    x, xo = rf"{_E}/x_layers[_/](?P<n>\d+)", f"{hf}encoder.x_layers.{{n}}"
    return [*embedding_rules("lxmert", hf),
            *dense(f"{_E}/visn_fc/visn_fc", f"{hf}encoder.visn_fc.visn_fc", H, "visual_feat_dim"),
            *norm(f"{_E}/visn_fc/visn_layer_norm", f"{hf}encoder.visn_fc.visn_layer_norm", H),
            *dense(f"{_E}/visn_fc/box_fc", f"{hf}encoder.visn_fc.box_fc", H, "visual_pos_dim"),
            *norm(f"{_E}/visn_fc/box_layer_norm", f"{hf}encoder.visn_fc.box_layer_norm", H),
            *_single(rf"{_E}/layer_(?P<n>\d+)", f"{hf}encoder.layer.{{n}}"),
            *_single(rf"{_E}/r_layers[_/](?P<n>\d+)", f"{hf}encoder.r_layers.{{n}}"),
            *_attention(f"{x}/visual_attention", f"{xo}.visual_attention", "att"),
            *_attention(f"{x}/(?P<s>lang|visn)_self_att", f"{xo}.{{s}}_self_att", "self"),
            *_ffn(x, xo, "lang_inter", "lang_output"), *_ffn(x, xo, "visn_inter", "visn_output"),
            *dense("lxmert/pooler/dense", f"{hf}pooler.dense", H, H)]


_ANSWER = [*dense(r"answer_head/logit_fc[_/]0", "answer_head.logit_fc.0", f"2*{H}", H),
           *norm(r"answer_head/logit_fc[_/]2", "answer_head.logit_fc.2", f"2*{H}"),
           *dense(r"answer_head/logit_fc[_/]3", "answer_head.logit_fc.3", "num_qa_labels", f"2*{H}")]
_OBJECT = [*dense("obj_predict_head/transform/dense", "obj_predict_head.transform.dense", H, H),
           *norm("obj_predict_head/transform/LayerNorm", "obj_predict_head.transform.LayerNorm", H),
           *dense("obj_predict_head/decoder_dict/obj", "obj_predict_head.decoder_dict.obj", "num_object_labels", H),
           *dense("obj_predict_head/decoder_dict/attr", "obj_predict_head.decoder_dict.attr", "num_attr_labels", H),
           *dense("obj_predict_head/decoder_dict/feat", "obj_predict_head.decoder_dict.feat", "visual_feat_dim", H)]
_COUNT = {r"^(?:lxmert\.)?encoder\.layer\.(\d+)\.": "l_layers", r"^(?:lxmert\.)?encoder\.x_layers\.(\d+)\.": "x_layers",
          r"^(?:lxmert\.)?encoder\.r_layers\.(\d+)\.": "r_layers"}
_DETECT = (r"^(lxmert/)?encoder/x_layers[_/]\d+/visual_attention/",)


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "lxmert", "lxmert", cls, tuple(rules), (*_DETECT, *detect), _COUNT,
                required=("num_attention_heads",), passthrough=True, tokenizer="BertTokenizer")


ARCHS = [_arch("lxmert-pretraining", "LxmertForPreTraining", [*_body("lxmert."), *PRETRAINING, *_OBJECT, *_ANSWER],
               r"^cls/predictions/", r"^obj_predict_head/", r"^answer_head/"),
         _arch("lxmert-qa", "LxmertForQuestionAnswering", [*_body("lxmert."), *_ANSWER], r"^answer_head/"),
         _arch("lxmert", "LxmertModel", _body(""))]
