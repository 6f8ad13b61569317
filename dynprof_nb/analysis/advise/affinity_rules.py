# ruff: noqa: E501
"""msprof-analyze's affinity-API rule table, as its advisor resolves it (generated
by tests/msprof_affinity_rules.py --write from msprof-analyze 26.2.0's
advisor/rules/timeline_fusion_ops.yaml, Apache-2.0, Copyright (c) Huawei Technologies Co.,
Ltd.; do not edit): for CANN 8.0.0 and torch 2.1.0, each operator sequence
(``-`` between names; ``(a|b){m,n}`` parts are regular expressions) -> the affine API(s) (``/``
between several)."""

RULES = {
    "cann_version": "8.0.0",
    "torch_version": "2.1.0",
    "aten": {
        "(permute)-(contiguous){0,1}-(reshape)": "torch_npu.npu_confusion_transpose",
        "(permute)-(contiguous){0,1}-(view)": "torch_npu.npu_confusion_transpose",
        "(transpose)-(contiguous){0,1}-(reshape)": "torch_npu.npu_confusion_transpose",
        "(transpose)-(contiguous){0,1}-(view)": "torch_npu.npu_confusion_transpose",
        "(reshape)-(contiguous){0,1}-(permute)": "torch_npu.npu_confusion_transpose",
        "(reshape)-(contiguous){0,1}-(transpose)": "torch_npu.npu_confusion_transpose",
        "(view)-(contiguous){0,1}-(permute)": "torch_npu.npu_confusion_transpose",
        "(view)-(contiguous){0,1}-(transpose)": "torch_npu.npu_confusion_transpose",
        "gelu": "torch_npu.fast_gelu",
        "softmax-(mul){0,1}-(masked_fill_)": "torch_npu.npu_scaled_masked_softmax",
        "softmax-(mul){0,1}-(add)": "torch_npu.npu_scaled_masked_softmax",
        "add-reciprocal-mul": "optimizer.clip_grad_norm_fused_",
        "matmul-(add){0,1}-(mul){0,1}-(masked_fill_){0,1}-softmax-(dropout){0,1}-matmul": "torch_npu.npu_fusion_attention",
        "matmul-(add){0,1}-(mul){0,1}-(add){0,1}-softmax-(dropout){0,1}-matmul": "torch_npu.npu_fusion_attention",
        "(chunk)-neg-cat-(mul){0,2}-add": "torch_npu.npu_rotary_mul",
        "(slice)-neg-cat-(mul){0,2}-add": "torch_npu.npu_rotary_mul",
        "(pow){0,1}-(mean){0,1}-(add){0,1}-rsqrt-mul-(type_as){0,1}": "torch_npu.npu_rms_norm",
        "(slice)-silu-mul": "torch_npu.npu_swiglu",
        "(chunk)-silu-mul": "torch_npu.npu_swiglu",
        "(slice)-mul-silu": "torch_npu.npu_swiglu",
        "(chunk)-mul-silu": "torch_npu.npu_swiglu",
        "(slice)-sigmoid-mul-mul": "torch_npu.npu_swiglu",
        "(chunk)-sigmoid-mul-mul": "torch_npu.npu_swiglu",
        "(slice)-mul-sigmoid-mul": "torch_npu.npu_swiglu",
        "(chunk)-mul-sigmoid-mul": "torch_npu.npu_swiglu",
        "(slice)-mul-mul-sigmoid": "torch_npu.npu_swiglu",
        "(chunk)-mul-mul-sigmoid": "torch_npu.npu_swiglu",
        "(slice)-gelu-mul": "torch_npu.npu_geglu",
        "(chunk)-gelu-mul": "torch_npu.npu_geglu",
        "(slice)-mul-gelu": "torch_npu.npu_geglu",
        "(chunk)-mul-gelu": "torch_npu.npu_geglu",
        "group_norm-silu": "torch_npu.npu_group_norm_silu",
        "mul-mul-add": "torch.addmm",
        "add-layer_norm": "torch_npu.npu_add_layer_norm",
    },
    "optimizer": {
        "AdamW.step": "torch_npu.optim.NpuFusedAdamW",
        "SGD.step": "torch_npu.optim.NpuFusedSGD",
        "Adadelta.step": "torch_npu.optim.NpuFusedAdadelta",
        "Lamb.step": "torch_npu.optim.NpuFusedLamb",
        "AdamP.step": "torch_npu.optim.NpuFusedAdamP",
        "BertAdam.step": "torch_npu.optim.NpuFusedBertAdam",
        "RMSprop.step": "torch_npu.optim.NpuFusedRMSprop",
        "RMSpropTF.step": "torch_npu.optim.NpuFusedRMSpropTF",
        "Adam.step": "torch_npu.optim.NpuFusedAdam",
    },
}
