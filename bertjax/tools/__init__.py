"""Checkpoint surgery run once: conversion to and from Hugging Face, DistilBERT's student
initialisation, ELECTRA's second stage."""
