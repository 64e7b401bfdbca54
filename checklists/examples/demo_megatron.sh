#!/bin/bash
# The demo's reference run (`workbench demo`): a small Llama (4 layers, hidden 256, GQA 8/4, RoPE base
# 500000) in the upstream Megatron-LM style (bash arrays), sized in datasets/demo_model.yaml so that
# every planted fault of datasets/demo_faults.yaml stands outside the clean pair's noise. Its
# MindFormers counterpart is demo_mindformers.yaml (fp32, no dropout, deterministic, no fused kernels).
#   workbench checklist checklists/examples/demo_megatron.sh checklists/examples/demo_mindformers.yaml

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=1
NNODES=1
CHECKPOINT_PATH=${CHECKPOINT_PATH:-"./checkpoints/demo_llama"}
DATA_PATH=${DATA_PATH:-"./data/demo_llama_text_document"}

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
    --master_addr localhost
    --master_port 6000
)

MODEL_ARGS=(
    --use-mcore-models
    --transformer-impl local
    --num-layers 4
    --hidden-size 256
    --ffn-hidden-size 704
    --num-attention-heads 8
    --group-query-attention
    --num-query-groups 4
    --seq-length 128
    --max-position-embeddings 128
    --normalization RMSNorm
    --norm-epsilon 1e-5
    --swiglu
    --position-embedding-type rope
    --rotary-base 500000
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --hidden-dropout 0.0
    --attention-dropout 0.0
    --no-rope-fusion
    --no-bias-swiglu-fusion
    --init-method-std 0.04
)

TRAINING_ARGS=(
    --micro-batch-size 4
    --global-batch-size 4
    --train-iters 40
    --lr 1.0e-3
    --min-lr 1.0e-4
    --lr-decay-style cosine
    --lr-warmup-iters 0
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --adam-eps 1e-8
    --clip-grad 1.0
    --seed 1234
    --deterministic-mode
)

DATA_ARGS=(
    --tokenizer-type NullTokenizer
    --vocab-size 1024
    --make-vocab-size-divisible-by 128
    --data-path $DATA_PATH
    --split 100,0,0
)

OUTPUT_ARGS=(
    --log-interval 1
    --save-interval 40
    --eval-interval 1000
    --eval-iters 0
    --save $CHECKPOINT_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${OUTPUT_ARGS[@]} 2>&1 | tee logs/demo_llama_megatron.log
