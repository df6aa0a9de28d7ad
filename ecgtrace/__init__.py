"""ecgtrace: does a multimodal model really read the ECG?"""

__version__ = "0.1.0"
