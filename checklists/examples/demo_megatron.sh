#!/bin/bash
# A tiny Llama (2 layers, hidden 64, GQA 4/2) pretraining launch in the upstream Megatron-LM
# style (bash arrays). Its MindFormers counterpart is llama_tiny_mindformers.yaml; the pair
# is set up for an alignment run (fp32, no dropout, deterministic, no fused kernels).
#   workbench checklist checklists/examples/llama_tiny_megatron.sh checklists/examples/llama_tiny_mindformers.yaml

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=1
NNODES=1
CHECKPOINT_PATH=${CHECKPOINT_PATH:-"./checkpoints/llama_tiny"}
DATA_PATH=${DATA_PATH:-"./data/llama_tiny_text_document"}

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
    --master_addr localhost
    --master_port 6000
)

MODEL_ARGS=(
    --use-mcore-models
    --transformer-impl local
    --num-layers 2
    --hidden-size 64
    --ffn-hidden-size 176
    --num-attention-heads 4
    --group-query-attention
    --num-query-groups 2
    --seq-length 32
    --max-position-embeddings 32
    --normalization RMSNorm
    --norm-epsilon 1e-5
    --swiglu
    --position-embedding-type rope
    --rotary-base 10000
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --hidden-dropout 0.0
    --attention-dropout 0.0
    --no-rope-fusion
    --no-bias-swiglu-fusion
)

TRAINING_ARGS=(
    --micro-batch-size 2
    --global-batch-size 4
    --train-iters 20
    --lr 1.0e-3
    --min-lr 1.0e-4
    --lr-decay-style cosine
    --lr-warmup-iters 2
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
    --vocab-size 128
    --make-vocab-size-divisible-by 16
    --data-path $DATA_PATH
    --split 100,0,0
)

OUTPUT_ARGS=(
    --log-interval 1
    --save-interval 20
    --eval-interval 1000
    --eval-iters 0
    --save $CHECKPOINT_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${OUTPUT_ARGS[@]} 2>&1 | tee logs/llama_tiny_megatron.log
