"""int8 quantization of a deployment: weights quantized per output channel, activation
scales from calibration frames or from a QDQ model's own, each as ONNX Runtime's
quantization tools compute them (onnxruntime.quantization).

May import: csdf, sdf3.
"""
