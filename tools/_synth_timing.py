"""Conduction times of synthetic beats, shared by the default and the holtercare schedules."""

NORMAL_PR_MS = 160.0
PAC_PR_MS = 130.0
AVB1_PR_MS = 280.0
